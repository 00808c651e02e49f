// `tpserve keys`: makes the CurveZMQ key directory a coordinator, its clients and its worker groups
// use (comm/curve_keys.h).
//   tpserve keys init DIR               coordinator pair, one client and one worker pair ("default")
//   tpserve keys add-client DIR NAME    one more client pair (give NAME.key to that client)
//   tpserve keys add-worker DIR NAME    one more worker-group pair
#pragma once

namespace tpserve {

// argv[1] is "keys". Returns the process exit code (0, 1 on failure, 2 on a bad command line).
int RunKeysCommand(int argc, char** argv);

}  // namespace tpserve
