#include "comm/worker_message.h"

#include <cstdio>

#include <capnp/message.h>

#include "comm/wire_convert.h"

namespace tpserve {

static_assert(kWorkerProtocolVersion == wire::WORKER_PROTOCOL_VERSION,
              "kWorkerProtocolVersion out of step with comm/schema/worker.capnp");

namespace {

constexpr int kMaxStatusCode = static_cast<int>(StatusCode::kInternal);

// Overload set for std::visit.
template <class... Fs>
struct Overloaded : Fs... {
  using Fs::operator()...;
};
template <class... Fs>
Overloaded(Fs...) -> Overloaded<Fs...>;

std::string ReadData(capnp::Data::Reader data) {
  return std::string(reinterpret_cast<const char*>(data.begin()), data.size());
}

}  // namespace

std::string ModelFingerprint::ToHex() const {
  std::string hex = std::to_string(file_size) + ":";
  char buf[3];
  for (unsigned char c : sha256) {
    std::snprintf(buf, sizeof(buf), "%02x", c);
    hex += buf;
  }
  return hex;
}

namespace {

void FillFingerprint(const ModelFingerprint& model, wire::ModelFingerprint::Builder out) {
  out.setFileSize(model.file_size);
  out.setSha256(capnp::Data::Reader(reinterpret_cast<const kj::byte*>(model.sha256.data()), model.sha256.size()));
}

ModelFingerprint ReadFingerprint(wire::ModelFingerprint::Reader in) {
  ModelFingerprint model;
  model.file_size = in.getFileSize();
  model.sha256 = ReadData(in.getSha256());
  return model;
}

}  // namespace

std::string EncodeWorkerMessage(const WorkerMessage& message) {
  capnp::MallocMessageBuilder builder;
  auto root = builder.initRoot<wire::WorkerMessage>();
  std::visit(Overloaded{
                 [&](const HelloMessage& m) {
                   auto out = root.initHello();
                   out.setProtocolVersion(m.protocol_version);
                   FillFingerprint(m.model, out.initModel());
                   if (m.draft_model) FillFingerprint(*m.draft_model, out.initDraftModel());
                   out.setTpSize(m.tp_size);
                   out.setNumBlocks(m.num_blocks);
                   out.setBlockSize(m.block_size);
                   out.setMaxModelLen(m.max_model_len);
                   out.setVocabSize(m.vocab_size);
                   out.setHostname(m.hostname);
                   out.setPid(m.pid);
                   auto sliding = out.initKvGroupSliding(static_cast<unsigned>(m.kv_groups.sliding.size()));
                   for (unsigned g = 0; g < sliding.size(); ++g) sliding.set(g, m.kv_groups.sliding[g]);
                   out.setSlidingWindow(m.kv_groups.window);
                   out.setKvDtype(m.kv_dtype);
                 },
                 [&](const WelcomeMessage& m) {
                   auto out = root.initWelcome();
                   out.setGroupId(m.group_id);
                   out.setHeartbeatIntervalMs(m.heartbeat_interval_ms);
                 },
                 [&](const StepPlan& m) { wire_convert::FillStepPlan(m, root.initStepPlan()); },
                 [&](const StepResult& m) { wire_convert::FillStepResult(m, root.initStepResult()); },
                 [&](const HeartbeatMessage& m) {
                   auto out = root.initHeartbeat();
                   out.setSequence(m.sequence);
                   out.setSentUnixMicros(m.sent_unix_micros);
                   out.setIsEcho(m.is_echo);
                   out.setGroupId(m.group_id);
                 },
                 [&](const ShutdownMessage& m) { root.initShutdown().setReason(m.reason); },
                 [&](const ErrorMessage& m) {
                   auto out = root.initError();
                   out.setCode(static_cast<uint16_t>(m.code));
                   out.setMessage(m.message);
                   out.setStepId(m.step_id);
                   out.setIsFatal(m.is_fatal);
                 },
             },
             message);
  return wire_convert::ToBytes(builder);
}

StatusOr<WorkerMessage> DecodeWorkerMessage(std::string_view bytes, const DecodeLimits& limits) {
  std::optional<WorkerMessage> decoded;
  Status semantic = OkStatus();
  RETURN_IF_ERROR(wire_convert::ReadFlatMessage(bytes, limits, [&](capnp::MessageReader& reader) {
    auto root = reader.getRoot<wire::WorkerMessage>();
    switch (root.which()) {
      case wire::WorkerMessage::HELLO: {
        auto in = root.getHello();
        HelloMessage m;
        m.protocol_version = in.getProtocolVersion();
        m.model = ReadFingerprint(in.getModel());
        if (in.hasDraftModel()) m.draft_model = ReadFingerprint(in.getDraftModel());
        m.tp_size = in.getTpSize();
        m.num_blocks = in.getNumBlocks();
        m.block_size = in.getBlockSize();
        m.max_model_len = in.getMaxModelLen();
        m.vocab_size = in.getVocabSize();
        m.hostname = in.getHostname().cStr();
        m.pid = in.getPid();
        if (auto sliding = in.getKvGroupSliding(); sliding.size() > 0) {
          m.kv_groups.sliding.clear();
          for (bool slides : sliding) m.kv_groups.sliding.push_back(slides);
        }
        m.kv_groups.window = in.getSlidingWindow();
        if (in.getKvDtype().size() > 0) m.kv_dtype = in.getKvDtype().cStr();
        decoded = std::move(m);
        break;
      }
      case wire::WorkerMessage::WELCOME: {
        auto in = root.getWelcome();
        decoded = WelcomeMessage{in.getGroupId(), in.getHeartbeatIntervalMs()};
        break;
      }
      case wire::WorkerMessage::STEP_PLAN:
        decoded = wire_convert::ReadStepPlan(root.getStepPlan());
        break;
      case wire::WorkerMessage::STEP_RESULT:
        decoded = wire_convert::ReadStepResult(root.getStepResult());
        break;
      case wire::WorkerMessage::HEARTBEAT: {
        auto in = root.getHeartbeat();
        decoded = HeartbeatMessage{in.getSequence(), in.getSentUnixMicros(), in.getIsEcho(), in.getGroupId()};
        break;
      }
      case wire::WorkerMessage::SHUTDOWN:
        decoded = ShutdownMessage{root.getShutdown().getReason().cStr()};
        break;
      case wire::WorkerMessage::ERROR: {
        auto in = root.getError();
        if (in.getCode() == 0 || in.getCode() > kMaxStatusCode) {
          semantic = InvalidArgument("worker message: error code " + std::to_string(in.getCode()) +
                                     " out of range");
          break;
        }
        decoded = ErrorMessage{static_cast<StatusCode>(in.getCode()), in.getMessage().cStr(), in.getStepId(),
                               in.getIsFatal()};
        break;
      }
      default:
        semantic = InvalidArgument("worker message: unknown kind " + std::to_string(root.which()) +
                                   " (a newer protocol?)");
    }
  }));
  RETURN_IF_ERROR(semantic);
  CHECK(decoded.has_value());
  if (const auto* plan = std::get_if<StepPlan>(&*decoded)) RETURN_IF_ERROR(ValidateStepPlan(*plan));
  if (const auto* result = std::get_if<StepResult>(&*decoded)) RETURN_IF_ERROR(ValidateStepResult(*result));
  if (const auto* hello = std::get_if<HelloMessage>(&*decoded)) {
    if (hello->tp_size < 1 || hello->num_blocks < 0 || hello->block_size < 0 || hello->max_model_len < 0 ||
        hello->vocab_size < 0) {
      return InvalidArgument("worker message: Hello with a negative size or tp_size < 1");
    }
    if (Status groups = hello->kv_groups.Validate(); !groups.ok()) {
      return InvalidArgument("worker message: Hello: " + groups.message());
    }
  }
  return std::move(*decoded);
}

Status CheckProtocolVersion(const HelloMessage& hello) {
  if (hello.protocol_version == kWorkerProtocolVersion) return OkStatus();
  return FailedPrecondition("worker speaks protocol version " + std::to_string(hello.protocol_version) +
                            ", this side speaks " + std::to_string(kWorkerProtocolVersion));
}

const char* WorkerMessageName(const WorkerMessage& message) {
  static constexpr const char* kNames[] = {"Hello", "Welcome", "StepPlan", "StepResult",
                                           "Heartbeat", "Shutdown", "Error"};
  return kNames[message.index()];
}

}  // namespace tpserve
