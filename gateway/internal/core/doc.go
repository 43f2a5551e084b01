// Package core is what every component of the gateway shares and none
// owns: the floor the fronts, the runner and the upstream side stand on.
//
//   - tasks.go: the protocol versions the gateway speaks, the _meta keys
//     (related task, tasks extension, and the 2026-07-28 request's:
//     MetaProtocolVersion, MetaClientInfo, MetaClientCaps, MetaLogLevel,
//     MetaServerInfo), owners (OwnerOf, AuthOwner,
//     Owner2026, AnonOwner, LogOwner; Principal, whose fair share a
//     request counts in; docs/ARCHITECTURE.md invariant 3),
//     the task wire shapes of both protocols (Task2025, Task2026),
//     params.task (TaskParam, TaskCall), StatelessResult.
//   - params.go: a tools/call's params decoded once (CallParams,
//     DecodeCall) and carried in that form: the tool, the task asked
//     for, an MRTR retry's requestState and answers.
//   - errors.go: RPCError, the one place an error becomes a JSON-RPC error
//     with its HTTP status for a client of either era (ClientEra), and
//     TaskError, which logs what is not the client's doing.
//   - input.go: input requests and their answers: the request ids the
//     gateway mints for a 2025-11-25 client, InputAnswer as stored,
//     MaxInputRequests, IsInputRequired for an MRTR round.
//   - created.go: an upstream's CreateTaskResult checked, in both shapes
//     (ParseCreateTaskResult, ParseCreateTaskResult2026).
//   - anonymous.go: the caps on tasks of clients without Authorization
//     (AnonymousTasks, Anonymous, AnonymousTTL).
//   - header.go: the Base64 form of 2026-07-28 header values.
//   - every.go: Every, the loop of the background components, and
//     ResyncInterval, how often a waiting reader re-reads a task.
//
// It may import taskstore, upstream, auth and internal/mcpwire, and
// nothing of the gateway: `go list -deps` of this package names no other
// gateway package.
package core
