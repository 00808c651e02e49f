// Tokenizer::FromHfDir: a Hugging Face tokenizer.json (byte-level BPE) and tokenizer_config.json.
#include <cmath>
#include <filesystem>
#include <limits>
#include <optional>

#include "common/json.h"
#include "model/tokenizer.h"

namespace tpserve {
namespace {

// The Split patterns of Llama 3 and Qwen 2 tokenizer.json files, exactly as written there.
constexpr std::string_view kLlama3Pattern =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
constexpr std::string_view kQwen2Pattern =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

// The pre-tokenizer name (see PreTokenizerFromName) equivalent to a tokenizer.json pre_tokenizer.
StatusOr<std::string> PreTokenizerOf(const JsonValue& pre, const std::string& path) {
  auto type_of = [](const JsonValue& v) -> std::string {
    const JsonValue* t = v.Find("type");
    return t != nullptr && t->is_string() ? t->string_value() : "";
  };
  auto is_byte_level = [&](const JsonValue& v, bool with_regex) {
    if (type_of(v) != "ByteLevel") return false;
    const JsonValue* regex = v.Find("use_regex");
    const bool uses_regex = regex == nullptr || (regex->is_bool() && regex->bool_value());
    const JsonValue* prefix = v.Find("add_prefix_space");
    const bool adds_prefix = prefix != nullptr && prefix->is_bool() && prefix->bool_value();
    return uses_regex == with_regex && !adds_prefix;
  };
  if (is_byte_level(pre, true)) return std::string("gpt2");
  if (type_of(pre) == "Sequence") {
    const JsonValue* list = pre.Find("pretokenizers");
    if (list != nullptr && list->is_array() && list->size() == 2) {
      const JsonValue& first = (*list)[0];
      const JsonValue& second = (*list)[1];
      if (type_of(first) == "Digits" && is_byte_level(second, true)) {
        const JsonValue* individual = first.Find("individual_digits");
        if (individual != nullptr && individual->is_bool() && individual->bool_value()) return std::string("smollm");
      }
      if (type_of(first) == "Split" && is_byte_level(second, false)) {
        const JsonValue* pattern = first.Find("pattern");
        const JsonValue* regex = pattern != nullptr ? pattern->Find("Regex") : nullptr;
        if (regex != nullptr && regex->is_string()) {
          if (regex->string_value() == kLlama3Pattern) return std::string("llama3");
          if (regex->string_value() == kQwen2Pattern) return std::string("qwen2");
        }
      }
    }
  }
  return Unimplemented(path + ": pre_tokenizer " + pre.Dump().substr(0, 200) + " is not supported");
}

std::string TypeOf(const JsonValue* v) {
  if (v == nullptr || !v->is_object()) return "";
  const JsonValue* t = v->Find("type");
  return t != nullptr && t->is_string() ? t->string_value() : "";
}

// SentencePiece style (Llama 2, TinyLlama, Mistral tokenizer.json): spaces become "▁" through a
// normalizer (Replace " " -> "▁", optionally Prepend "▁") or a Metaspace pre-tokenizer, and the
// model is a BPE over those pieces with byte fallback. Returns whether a space is prepended, or
// nullopt if the file is not of this style.
std::optional<bool> SentencePieceStyle(const JsonValue& json) {
  constexpr std::string_view kSpace = "\xE2\x96\x81";
  bool replaces_space = false, prepends = false;
  std::vector<const JsonValue*> normalizers;
  const JsonValue* norm = json.Find("normalizer");
  if (TypeOf(norm) == "Sequence") {
    const JsonValue* list = norm->Find("normalizers");
    for (size_t i = 0; list != nullptr && list->is_array() && i < list->size(); ++i) normalizers.push_back(&(*list)[i]);
  } else if (norm != nullptr && norm->is_object()) {
    normalizers.push_back(norm);
  }
  for (const JsonValue* n : normalizers) {
    if (TypeOf(n) == "Prepend") {
      auto p = n->GetString("prepend");
      prepends = prepends || (p.ok() && *p == kSpace);
    } else if (TypeOf(n) == "Replace") {
      const JsonValue* pattern = n->Find("pattern");
      const JsonValue* from = pattern != nullptr ? pattern->Find("String") : nullptr;
      auto to = n->GetString("content");
      replaces_space = replaces_space || (from != nullptr && from->is_string() && from->string_value() == " " &&
                                          to.ok() && *to == kSpace);
    }
  }
  const JsonValue* pre = json.Find("pre_tokenizer");
  if (TypeOf(pre) == "Metaspace") {
    auto scheme = pre->GetString("prepend_scheme");
    auto add_prefix = pre->GetBool("add_prefix_space");
    replaces_space = true;
    prepends = scheme.ok() ? *scheme != "never" : (!add_prefix.ok() || *add_prefix);
  } else if (pre != nullptr && !pre->is_null()) {
    return std::nullopt;
  }
  if (!replaces_space) return std::nullopt;
  return prepends;
}

// bos_token / eos_token in tokenizer_config.json: a string or {"content": string}.
std::string TokenContent(const JsonValue& config, std::string_view key) {
  const JsonValue* v = config.Find(key);
  if (v == nullptr) return "";
  if (v->is_string()) return v->string_value();
  if (v->is_object()) {
    const JsonValue* c = v->Find("content");
    if (c != nullptr && c->is_string()) return c->string_value();
  }
  return "";
}

}  // namespace

StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::FromHfDir(const std::string& dir) {
  const std::string path = dir + "/tokenizer.json";
  ASSIGN_OR_RETURN(JsonValue json, ReadJsonFile(path));
  auto corrupt = [&](const std::string& what) { return DataLoss(path + ": " + what); };
  const JsonValue* model = json.Find("model");
  if (model == nullptr || !model->is_object()) return corrupt("no model object");
  const JsonValue* type = model->Find("type");
  if (type == nullptr || !type->is_string() || type->string_value() != "BPE") {
    return Unimplemented(path + ": only BPE tokenizer models are supported");
  }
  TokenizerVocab vocab;
  vocab.model = TokenizerModel::kBpe;
  if (const JsonValue* ignore = model->Find("ignore_merges"); ignore != nullptr && ignore->is_bool()) {
    vocab.ignore_merges = ignore->bool_value();
  }
  const std::optional<bool> spm_prefix = SentencePieceStyle(json);
  if (spm_prefix) {
    vocab.model = TokenizerModel::kSpm;
    vocab.add_space_prefix = *spm_prefix;
  } else {
    const JsonValue* pre = json.Find("pre_tokenizer");
    if (pre == nullptr || !pre->is_object()) return Unimplemented(path + ": BPE without a ByteLevel pre_tokenizer");
    ASSIGN_OR_RETURN(vocab.pre, PreTokenizerOf(*pre, path));
  }

  // Pieces: model.vocab plus added_tokens (which may extend it), placed at their ids.
  const JsonValue* pieces = model->Find("vocab");
  if (pieces == nullptr || !pieces->is_object()) return corrupt("no model.vocab object");
  std::vector<std::pair<int64_t, std::string>> entries;
  std::vector<std::pair<int64_t, bool>> added;  // id, special
  for (size_t i = 0; i < pieces->size(); ++i) {
    const JsonValue& id = (*pieces)[i];
    if (!id.is_integer() || id.int_value() < 0) return corrupt("model.vocab[\"" + pieces->key(i) + "\"] is not an id");
    entries.emplace_back(id.int_value(), pieces->key(i));
  }
  if (const JsonValue* list = json.Find("added_tokens"); list != nullptr && list->is_array()) {
    for (size_t i = 0; i < list->size(); ++i) {
      const JsonValue& t = (*list)[i];
      auto id = t.GetInt("id");
      auto content = t.GetString("content");
      if (!id.ok() || !content.ok() || *id < 0) return corrupt("added_tokens[" + std::to_string(i) + "] malformed");
      auto special = t.GetBool("special");
      entries.emplace_back(*id, *content);
      added.emplace_back(*id, special.ok() && *special);
    }
  }
  int64_t size = 0;
  for (const auto& [id, piece] : entries) size = std::max(size, id + 1);
  if (size > (int64_t{1} << 24)) return corrupt("token id " + std::to_string(size - 1) + " is implausibly large");
  vocab.pieces.assign(size, "");
  vocab.types.assign(size, TokenType::kUnused);  // ids no entry names stay unused
  for (const auto& [id, piece] : entries) {
    vocab.pieces[id] = piece;
    vocab.types[id] = TokenType::kNormal;
  }
  for (const auto& [id, special] : added) vocab.types[id] = special ? TokenType::kControl : TokenType::kUserDefined;

  const JsonValue* merges = model->Find("merges");
  if (merges == nullptr || !merges->is_array()) return corrupt("no model.merges array");
  vocab.merges.reserve(merges->size());
  for (size_t i = 0; i < merges->size(); ++i) {
    const JsonValue& m = (*merges)[i];
    if (m.is_string()) {
      vocab.merges.push_back(m.string_value());
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      vocab.merges.push_back(m[0].string_value() + " " + m[1].string_value());
    } else {
      return corrupt("model.merges[" + std::to_string(i) + "] is neither \"a b\" nor [a, b]");
    }
  }

  if (vocab.model == TokenizerModel::kSpm) {
    // Merge priority -> score: a piece scores minus the rank of its best merge; pieces no merge
    // makes can never be merge results. <0xNN> pieces are byte-fallback tokens.
    std::unordered_map<std::string, int32_t> ids;
    for (int32_t id = 0; id < static_cast<int32_t>(vocab.pieces.size()); ++id) ids.emplace(vocab.pieces[id], id);
    vocab.scores.assign(vocab.pieces.size(), -std::numeric_limits<float>::infinity());
    for (size_t rank = 0; rank < vocab.merges.size(); ++rank) {
      const std::string& m = vocab.merges[rank];
      const size_t space = m.find(' ', 1);
      if (space == std::string::npos) return corrupt("model.merges[" + std::to_string(rank) + "] is not \"a b\"");
      auto it = ids.find(m.substr(0, space) + m.substr(space + 1));
      if (it != ids.end() && std::isinf(vocab.scores[it->second])) vocab.scores[it->second] = -static_cast<float>(rank);
    }
    for (size_t id = 0; id < vocab.pieces.size(); ++id) {
      const std::string& p = vocab.pieces[id];
      if (vocab.types[id] == TokenType::kNormal && p.size() == 6 && p.compare(0, 3, "<0x") == 0 && p[5] == '>') {
        vocab.types[id] = TokenType::kByte;
      }
    }
    vocab.merges.clear();
  }

  // Optional tokenizer_config.json: BOS/EOS by content, add_bos_token, chat_template.
  const std::string config_path = dir + "/tokenizer_config.json";
  std::string bos, eos;
  if (std::filesystem::exists(config_path)) {
    ASSIGN_OR_RETURN(JsonValue config, ReadJsonFile(config_path));
    bos = TokenContent(config, "bos_token");
    eos = TokenContent(config, "eos_token");
    if (auto add_bos = config.GetBool("add_bos_token"); add_bos.ok()) vocab.add_bos = *add_bos;
    if (auto tmpl = config.GetString("chat_template"); tmpl.ok()) vocab.chat_template = *tmpl;
  }
  for (int32_t id = 0; id < static_cast<int32_t>(vocab.pieces.size()); ++id) {
    if (!bos.empty() && vocab.pieces[id] == bos && vocab.bos_id < 0) vocab.bos_id = id;
    if (!eos.empty() && vocab.pieces[id] == eos && vocab.eos_id < 0) vocab.eos_id = id;
  }
  if (const JsonValue* unk = model->Find("unk_token"); unk != nullptr && unk->is_string()) {
    for (int32_t id = 0; id < static_cast<int32_t>(vocab.pieces.size()); ++id) {
      if (vocab.pieces[id] == unk->string_value()) {
        vocab.unk_id = id;
        if (vocab.types[id] == TokenType::kNormal || vocab.types[id] == TokenType::kControl) {
          vocab.types[id] = TokenType::kUnknown;
        }
      }
    }
  }
  auto tokenizer = FromVocab(std::move(vocab));
  if (!tokenizer.ok()) {
    const Status& st = tokenizer.status();
    const StatusCode code = st.code() == StatusCode::kInvalidArgument ? StatusCode::kDataLoss : st.code();
    return Status(code, path + ": " + st.message());
  }
  return tokenizer;
}

}  // namespace tpserve
