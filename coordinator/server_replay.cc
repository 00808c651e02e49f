// Server: lost worker groups and the replay of their requests (declared in server.h). A group is lost
// by its deadlines (CheckGroups) or its connection; its scheduler releases every request, and each one
// moves to the least-loaded group serving, or waits as an orphan for the next group to register,
// bounded by max_replays and replay_wait.
#include <string>
#include <utility>
#include <vector>

#include "common/logging.h"
#include "coordinator/server.h"

namespace tpserve {

void Server::CheckGroups(Clock::time_point now) {
  std::vector<uint32_t> lost;
  for (const auto& [id, group] : groups_) {
    if (group->IsLost(now, options_.step_timeout, options_.heartbeat_timeout)) lost.push_back(id);
  }
  for (uint32_t id : lost) LoseGroup(id, "worker group stopped answering (step or heartbeat deadline)");
  ExpireOrphans(now);
}

void Server::LoseGroup(uint32_t group_id, const std::string& why, bool is_reregistering) {
  auto group_it = groups_.find(group_id);
  if (group_it == groups_.end()) return;
  LOG(WARN) << "coordinator: lost worker group " << group_id << ": " << why;
  metrics_.OnGroupLost(*group_it->second);  // before the release, whose preemptions are no pressure
  std::vector<ReleasedRequest> released = group_it->second->scheduler().ReleaseAll();
  if (!is_reregistering) (void)SendToWorker(group_it->second->routing_id(), ShutdownMessage{why});
  groups_.erase(group_it);  // its KV blocks with it
  const Clock::time_point now = Clock::now();
  for (ReleasedRequest& request : released) Replay(std::move(request), why, now);
}

void Server::Replay(ReleasedRequest request, const std::string& why, Clock::time_point now) {
  auto it = requests_.find(request.request_id);
  if (it == requests_.end()) return;
  RequestStream& stream = *it->second.stream;
  if (static_cast<int32_t>(stream.num_replays()) >= options_.max_replays) {
    FailRequest(request.request_id, proto::ErrorKind::kWorkerLost,
                "the worker group running this request was lost (" + why + "); replayed " +
                    std::to_string(stream.num_replays()) + " times already (--max-replays " +
                    std::to_string(options_.max_replays) + ")");
    return;
  }
  stream.CountReplay();
  ++num_replays_total_;
  it->second.group_id = 0;
  WorkerGroupLink* group = LeastLoadedGroup();
  if (group == nullptr) {
    orphans_.push_back({std::move(request), now});
    return;
  }
  AdoptOn(*group, std::move(request));
}

void Server::AdoptOn(WorkerGroupLink& group, ReleasedRequest request) {
  const uint64_t request_id = request.request_id;
  Status adopted = group.scheduler().Adopt(std::move(request));
  if (!adopted.ok()) {
    FailRequest(request_id, proto::ErrorKind::kWorkerLost,
                "the worker group running this request was lost, and group " + std::to_string(group.group_id()) +
                    " cannot run it: " + adopted.message());
    return;
  }
  requests_.at(request_id).group_id = group.group_id();
}

void Server::AdoptOrphans() {
  std::vector<Orphan> orphans = std::move(orphans_);
  orphans_.clear();
  for (Orphan& orphan : orphans) {
    WorkerGroupLink* group = LeastLoadedGroup();
    if (group == nullptr) {
      orphans_.push_back(std::move(orphan));
      continue;
    }
    AdoptOn(*group, std::move(orphan.request));
  }
}

void Server::ExpireOrphans(Clock::time_point now) {
  std::vector<uint64_t> expired;
  for (const Orphan& orphan : orphans_) {
    if (now - orphan.since > options_.replay_wait) expired.push_back(orphan.request.request_id);
  }
  for (uint64_t request_id : expired) {
    FailRequest(request_id, proto::ErrorKind::kWorkerLost,
                "the worker group running this request was lost and no group came back within " +
                    std::to_string(options_.replay_wait.count()) + " ms");
  }
}

}  // namespace tpserve
