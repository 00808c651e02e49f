// tpserve-teacher-logits: id sequences teacher-forced through the engine (one rank, the CPU executor)
// and through the float64 reference (tests/testing/reference_llama.h), the full logits of both written
// to files. Used by bench/logits_vs_reference.py (beside llama.cpp's, bench/peers/llama_logits.cc) and
// bench/greedy_vs_llama.py --judge (the reference's argmax along each engine's greedy ids).
//   tpserve-teacher-logits --model FILE (--ids 1,2,3 | --ids-file FILE) [--prefill P] [--threads N]
//                          [--kv-dtype f32|f16|bf16|q8_0] [--engine OUT] [--reference OUT]
// --ids-file holds one sequence a line ("1,2,3"). For each sequence the engine prefills ids[0, P) and
// then decodes the rest one step at a time, so it gives the logits at positions P-1 .. T-1; the files
// hold those T-P+1 rows of every sequence in turn: --engine float32 [rows][V], --reference float64
// [rows][V], little-endian, no header. Either may be omitted (the reference of a large model takes
// minutes; the engine alone seconds). The reference's weights are dequantised once for all sequences.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "common/command_line.h"
#include "model/model_file.h"
#include "tests/testing/reference_llama.h"
#include "worker/model_executor.h"

namespace tpserve {
namespace {

constexpr int kBlockSize = 16;

Status WriteRows(const std::string& path, const void* data, size_t bytes) {
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "wb"), &std::fclose);
  if (!f) return NotFound("cannot open " + path + " for writing");
  if (std::fwrite(data, 1, bytes, f.get()) != bytes) return DataLoss("short write to " + path);
  return OkStatus();
}

// The engine's logits at positions P-1 .. T-1 of each sequence in turn, [sum of T-P+1][V]: prefill
// ids[0, P), then one decode per id. One executor; each sequence overwrites the last one's KV blocks.
StatusOr<std::vector<float>> EngineLogits(const ModelFile& model, const std::vector<std::vector<int32_t>>& seqs,
                                          size_t prefill, int num_threads, DType kv_dtype) {
  size_t longest = 0;
  for (const auto& ids : seqs) longest = std::max(longest, ids.size());
  const int32_t num_blocks = static_cast<int32_t>((longest + kBlockSize - 1) / kBlockSize);
  std::unique_ptr<Communicator> comm = MakeLocalCommunicator();
  ExecutorOptions options;
  options.block_size = kBlockSize;
  options.num_kv_blocks = num_blocks;
  options.num_threads = num_threads;
  options.kv_dtype = kv_dtype;
  auto executor = ModelExecutor::Create(model, comm.get(), options);
  if (!executor.ok()) return executor.status();
  std::vector<int32_t> block_table(num_blocks);
  for (int32_t b = 0; b < num_blocks; ++b) block_table[b] = b;

  std::vector<float> logits;  // [rows, V]
  uint64_t step_id = 0;
  for (size_t s = 0; s < seqs.size(); ++s) {
    const std::vector<int32_t>& ids = seqs[s];
    size_t begin = 0;
    for (size_t end = prefill; end <= ids.size(); begin = end, ++end) {
      SequencePlan seq;
      seq.seq_id = s + 1;
      seq.num_cached = static_cast<int32_t>(begin);
      seq.token_ids.assign(ids.begin() + begin, ids.begin() + end);
      seq.block_table.assign(block_table.begin(), block_table.begin() + (end + kBlockSize - 1) / kBlockSize);
      seq.needs_token = true;
      StepPlan plan;
      plan.step_id = step_id++;
      plan.sequences.push_back(std::move(seq));
      plan.return_logits = true;
      auto result = (*executor)->Execute(plan);
      if (!result.ok()) return result.status();
      const std::vector<float>& row = result->sequences.at(0).logits;
      logits.insert(logits.end(), row.begin(), row.end());
    }
  }
  return logits;
}

// The sequences of --ids-file: one a line, "1,2,3"; blank lines skipped.
StatusOr<std::vector<std::vector<int32_t>>> ReadIdsFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return NotFound("cannot open " + path);
  std::vector<std::vector<int32_t>> seqs;
  for (std::string line; std::getline(in, line);) {
    std::vector<int32_t> ids;
    std::istringstream fields(line);
    for (std::string field; std::getline(fields, field, ',');) {
      try {
        ids.push_back(static_cast<int32_t>(std::stol(field)));
      } catch (const std::exception&) {
        return InvalidArgument(path + ": not an id list: " + line);
      }
    }
    if (!ids.empty()) seqs.push_back(std::move(ids));
  }
  return seqs;
}

int Run(int argc, char** argv) {
  std::string model_path, ids_file, engine_out, reference_out;
  std::vector<int32_t> ids;
  size_t prefill = 1;
  int num_threads = 2;
  CommandLine app("tpserve-teacher-logits: the engine's and the float64 reference's logits along a sequence.",
                  "tpserve-teacher-logits");
  app.add_option("--model", model_path, "GGUF file or HF directory")->required();
  auto* ids_option = app.add_option("--ids", ids, "the sequence: 1,2,3")->delimiter(',');
  app.add_option("--ids-file", ids_file, "sequences, one a line: 1,2,3")->excludes(ids_option);
  app.add_option("--prefill", prefill, "ids the engine prefills in one step (logits from position P-1 on)");
  app.add_option("--threads", num_threads, "engine threads");
  std::string kv_dtype = "f32";
  app.add_option("--kv-dtype", kv_dtype, "the engine's KV cache type: f32, f16, bf16 or q8_0");
  app.add_option("--engine", engine_out, "write the engine's float32 logits here");
  app.add_option("--reference", reference_out, "write the float64 reference's logits here");
  if (std::optional<int> exit_code = app.ParseOrExitCode(argc, argv)) return *exit_code;
  std::vector<std::vector<int32_t>> seqs{ids};
  if (!ids_file.empty()) {
    auto read = ReadIdsFile(ids_file);
    if (!read.ok()) {
      std::fprintf(stderr, "tpserve-teacher-logits: %s\n", read.status().ToString().c_str());
      return 2;
    }
    seqs = std::move(read).value();
  }
  for (const auto& seq : seqs) {
    if (prefill < 1 || prefill > seq.size()) {
      std::fprintf(stderr, "tpserve-teacher-logits: --prefill must be in [1, %zu] (give --ids or --ids-file)\n",
                   seq.size());
      return 2;
    }
  }
  auto model = ModelFile::Open(model_path);
  if (!model.ok()) {
    std::fprintf(stderr, "tpserve-teacher-logits: %s\n", model.status().ToString().c_str());
    return 1;
  }
  const int64_t vocab = (*model)->config().vocab_size;
  if (!engine_out.empty()) {
    auto type = ParseKvDType(kv_dtype);
    if (!type.ok()) {
      std::fprintf(stderr, "tpserve-teacher-logits: %s\n", type.status().ToString().c_str());
      return 2;
    }
    auto logits = EngineLogits(**model, seqs, prefill, num_threads, *type);
    Status written = logits.ok() ? WriteRows(engine_out, logits->data(), logits->size() * sizeof(float))
                                 : logits.status();
    if (!written.ok()) {
      std::fprintf(stderr, "tpserve-teacher-logits: engine: %s\n", written.ToString().c_str());
      return 1;
    }
  }
  if (!reference_out.empty()) {
    auto ref = testing::ReferenceLlama::Load((*model)->config(), (*model)->weights());
    if (!ref.ok()) {
      std::fprintf(stderr, "tpserve-teacher-logits: reference: %s\n", ref.status().ToString().c_str());
      return 1;
    }
    std::vector<double> rows;  // [rows, V]
    for (const auto& seq : seqs) {
      const std::vector<double> logits = ref->Forward(seq);  // [T, V]
      rows.insert(rows.end(), logits.begin() + (prefill - 1) * vocab, logits.end());
    }
    Status written = WriteRows(reference_out, rows.data(), rows.size() * sizeof(double));
    if (!written.ok()) {
      std::fprintf(stderr, "tpserve-teacher-logits: reference: %s\n", written.ToString().c_str());
      return 1;
    }
  }
  return 0;
}

}  // namespace
}  // namespace tpserve

int main(int argc, char** argv) { return tpserve::Run(argc, argv); }
