// Chat formats: render a conversation into the prompt text a chat model was trained on.
//
// The rendered text contains the format's special tokens in written form ("<|im_start|>", "<s>");
// encode it with Tokenizer::Encode(text, /*add_bos=*/false, /*parse_special=*/true). Formats whose
// layout starts with BOS (Llama 2 "<s>", Llama 3 "<|begin_of_text|>", Gemma "<bos>") write it themselves.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace tpserve {

struct ChatMessage {
  std::string role;  // "system", "user", "assistant"
  std::string content;
};

enum class ChatFormat {
  kChatML,  // SmolLM2, Qwen: <|im_start|>role\ncontent<|im_end|>\n
  kLlama2,  // <s>[INST] <<SYS>>\nsystem\n<</SYS>>\n\nuser [/INST] answer </s>
  kLlama3,  // <|begin_of_text|><|start_header_id|>role<|end_header_id|>\n\ncontent<|eot_id|>
  kGemma,   // <bos><start_of_turn>user\ncontent<end_of_turn>\n<start_of_turn>model\n...
  kPhi3,    // <|system|>\ncontent<|end|>\n<|user|>\ncontent<|end|>\n<|assistant|>\n...
};

// The format a Jinja chat template implements, by the markers it writes; ChatML when none match
// (also for an empty template).
ChatFormat DetectChatFormat(const std::string& chat_template);
// The same for a model file: by its template when it has one, else by the turn markers its vocabulary
// holds (`has_token(piece)`): <start_of_turn> Gemma, <|start_header_id|> Llama 3, <|im_start|> ChatML,
// <|user|> with <|end|> Phi-3; ChatML when none (files without a template: Gemma 3 270M's GGUF).
ChatFormat DetectChatFormat(const std::string& chat_template, const std::function<bool(std::string_view)>& has_token);
const char* ChatFormatName(ChatFormat format);

// The system prompt a ChatML template inserts when the conversation does not start with one
// (SmolLM2: "You are a helpful AI assistant named SmolLM, trained by Hugging Face"); "" if none.
std::string DefaultSystemPrompt(const std::string& chat_template);

// The conversation in `format`. add_generation_prompt appends the header of an assistant turn
// (ChatML, Llama 3; the Llama 2 layout needs none). ChatML: when default_system is non-empty and
// the first message is not a system message, a system message with it comes first (as SmolLM2's
// template does). Llama 2 and Llama 3 strip whitespace around contents as their reference code
// does; Llama 2 folds a leading system message into the first user turn and requires user and
// assistant turns to alternate (other roles are rendered as user turns). Gemma (Gemma 3's template)
// folds a leading system message into the first turn (its text, then a blank line), names the assistant
// "model" and strips whitespace around contents. Phi-3 (Phi-3-mini-4k-instruct's template) writes system,
// user and assistant turns as they are, skips other roles, and ends with <|endoftext|> when no
// generation prompt follows.
std::string RenderChat(ChatFormat format, const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                       const std::string& default_system = "");

// The written form of the token that ends an assistant turn: "<|im_end|>", "</s>", "<|eot_id|>",
// "<end_of_turn>", "<|end|>".
const char* EndOfTurnToken(ChatFormat format);

}  // namespace tpserve
