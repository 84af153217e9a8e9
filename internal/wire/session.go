package wire

// SessionKey is the gRPC metadata key of a worker's leader session. The leader hands a fresh
// random session to a worker in the header of each RegisterWorker answer and sends it on
// every task (RunTask, LoadShard) to that worker; the worker runs tasks only with the session
// of its latest registration, so only the coordinator it registered with (the leader, as far
// as the worker knows) can use it, not another holder of the join token.
const SessionKey = "gpreduce-session"
