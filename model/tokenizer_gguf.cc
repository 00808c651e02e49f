// Tokenizer::FromGguf: the tokenizer.ggml.* metadata of a GGUF file.
#include <cctype>

#include "model/gguf_file.h"
#include "model/tokenizer.h"

namespace tpserve {
namespace {

using Type = GgufValue::Type;

bool IsIntegerType(Type t) {
  return t == Type::kU8 || t == Type::kI8 || t == Type::kU16 || t == Type::kI16 || t == Type::kU32 ||
         t == Type::kI32 || t == Type::kU64 || t == Type::kI64 || t == Type::kBool;
}

// An optional integer/bool scalar; `fallback` when absent.
StatusOr<int64_t> OptionalInt(const GgufFile& file, const std::string& key, int64_t fallback) {
  const GgufValue* v = file.Get(key);
  if (v == nullptr) return fallback;
  if (!IsIntegerType(v->type)) return DataLoss(file.path() + ": " + key + " is not an integer");
  return v->i;
}

StatusOr<const GgufValue*> Array(const GgufFile& file, const std::string& key, bool required) {
  const GgufValue* v = file.Get(key);
  if (v == nullptr) {
    if (required) return NotFound(file.path() + ": no " + key);
    return static_cast<const GgufValue*>(nullptr);
  }
  if (v->type != Type::kArray) return DataLoss(file.path() + ": " + key + " is not an array");
  return v;
}

}  // namespace

StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::FromGguf(const GgufFile& file) {
  TokenizerVocab vocab;
  const GgufValue* model = file.Get("tokenizer.ggml.model");
  if (model == nullptr) return NotFound(file.path() + ": no tokenizer.ggml.model");
  if (model->type != Type::kString) return DataLoss(file.path() + ": tokenizer.ggml.model is not a string");
  if (model->s == "gpt2") {
    vocab.model = TokenizerModel::kBpe;
  } else if (model->s == "llama") {
    vocab.model = TokenizerModel::kSpm;
  } else {
    return Unimplemented(file.path() + ": tokenizer model \"" + model->s + "\" (supported: gpt2, llama)");
  }

  ASSIGN_OR_RETURN(const GgufValue* tokens, Array(file, "tokenizer.ggml.tokens", true));
  if (tokens->array_type != Type::kString) return DataLoss(file.path() + ": tokenizer.ggml.tokens holds no strings");
  vocab.pieces = tokens->strings;
  const size_t n = vocab.pieces.size();

  ASSIGN_OR_RETURN(const GgufValue* types, Array(file, "tokenizer.ggml.token_type", false));
  if (types != nullptr) {
    if (types->ints.size() != n) {
      return DataLoss(file.path() + ": tokenizer.ggml.token_type has " + std::to_string(types->ints.size()) +
                      " entries for " + std::to_string(n) + " tokens");
    }
    vocab.types.reserve(n);
    for (int64_t t : types->ints) vocab.types.push_back(static_cast<TokenType>(t));
  }
  ASSIGN_OR_RETURN(const GgufValue* scores, Array(file, "tokenizer.ggml.scores", false));
  if (scores != nullptr) {
    if (scores->floats.size() != n) {
      return DataLoss(file.path() + ": tokenizer.ggml.scores has " + std::to_string(scores->floats.size()) +
                      " entries for " + std::to_string(n) + " tokens");
    }
    vocab.scores.assign(scores->floats.begin(), scores->floats.end());
  }
  ASSIGN_OR_RETURN(const GgufValue* merges, Array(file, "tokenizer.ggml.merges", vocab.model == TokenizerModel::kBpe));
  if (merges != nullptr) vocab.merges = merges->strings;

  if (const GgufValue* pre = file.Get("tokenizer.ggml.pre"); pre != nullptr && pre->type == Type::kString) {
    vocab.pre = pre->s;
  }
  vocab.ignore_merges = vocab.pre == "llama-bpe" || vocab.pre == "llama3";
  ASSIGN_OR_RETURN(int64_t bos, OptionalInt(file, "tokenizer.ggml.bos_token_id", -1));
  ASSIGN_OR_RETURN(int64_t eos, OptionalInt(file, "tokenizer.ggml.eos_token_id", -1));
  ASSIGN_OR_RETURN(int64_t eot, OptionalInt(file, "tokenizer.ggml.eot_token_id", -1));
  ASSIGN_OR_RETURN(int64_t unk, OptionalInt(file, "tokenizer.ggml.unknown_token_id", -1));
  ASSIGN_OR_RETURN(int64_t pad, OptionalInt(file, "tokenizer.ggml.padding_token_id", -1));
  const bool is_spm = vocab.model == TokenizerModel::kSpm;
  ASSIGN_OR_RETURN(int64_t add_bos, OptionalInt(file, "tokenizer.ggml.add_bos_token", is_spm ? 1 : 0));
  ASSIGN_OR_RETURN(int64_t add_space, OptionalInt(file, "tokenizer.ggml.add_space_prefix", is_spm ? 1 : 0));
  for (int64_t id : {bos, eos, eot, unk, pad}) {
    if (id < -1 || id >= static_cast<int64_t>(n)) {
      return DataLoss(file.path() + ": special token id " + std::to_string(id) + " outside the vocabulary of " +
                      std::to_string(n));
    }
  }
  vocab.bos_id = static_cast<int32_t>(bos);
  vocab.eos_id = static_cast<int32_t>(eos);
  vocab.eot_id = static_cast<int32_t>(eot);
  // Byte-level BPE files name an "unknown" token (convert_hf_to_gguf writes id 0, SmolLM2's
  // <|endoftext|>) that the tokenizer never produces: a byte whose piece is missing from the
  // vocabulary (SmolLM2 lacks 21, e.g. U+0014) is dropped, as llama.cpp and HF tokenizers do.
  // Emitting the named id would put an end-of-text token into the prompt.
  vocab.unk_id = is_spm ? static_cast<int32_t>(unk) : -1;
  vocab.pad_id = static_cast<int32_t>(pad);
  vocab.add_bos = add_bos != 0;
  vocab.add_space_prefix = add_space != 0;
  // llama.cpp's rule for Phi-3 (special tokens strip the whitespace after them), keyed as it keys it.
  if (const GgufValue* name = file.Get("general.name"); name != nullptr && name->type == Type::kString) {
    std::string lower = name->s;
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    vocab.rstrip_specials = lower.find("phi-3") != std::string::npos || lower.find("phi3") != std::string::npos;
  }
  if (const GgufValue* tmpl = file.Get("tokenizer.chat_template"); tmpl != nullptr && tmpl->type == Type::kString) {
    vocab.chat_template = tmpl->s;
  }
  auto tokenizer = FromVocab(std::move(vocab));
  if (!tokenizer.ok()) {
    const Status& st = tokenizer.status();
    const StatusCode code = st.code() == StatusCode::kInvalidArgument ? StatusCode::kDataLoss : st.code();
    return Status(code, file.path() + ": " + st.message());
  }
  return tokenizer;
}

}  // namespace tpserve
