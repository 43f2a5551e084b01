// Package policy decides, per tools/call, whether the gateway forwards the
// call synchronously, turns it into a task, or holds it for a hybrid budget
// and then turns it into a task. It is pure: no I/O, no clocks read, no
// mutable globals. The gateway gives Decide the tool (name and annotations
// from tools/list), what the client declared (ClientKind), the rules (Config)
// and the tool's learned latency (Stats); it returns a Decision with a
// human-readable reason for the audit log.
//
// The decision table is in docs/ARCHITECTURE.md ("How a tools/call is
// decided"). In short, first match wins over the rules; a tool no rule
// matches follows latency: a p95 above Config.AutoAfter makes it "optional"
// to 2025-11-25 clients, and a modern client's auto call waits
// min(HybridWait, 2×p50) before becoming a task. pollInterval is the rule's,
// else about p50/4 within [250ms, 30s].
//
// # Rules
//
// The rule flags (--task, --task-required, --sync GLOB) come first, in
// command-line order; the rules file (--policy FILE) follows, in file
// order. First match wins. Current holds the Config in force and is
// swapped whole when the file is reloaded.
//
// # The rules file
//
// The file is JSON, or YAML (ParseRulesFile: by the name's .yaml/.yml,
// else by the content). ParseFile reads JSON strictly: unknown fields
// are errors, syntax errors carry line:column, and a wrong rule is
// reported as "rules.json: rule 2 (line 7): …". A YAML file is rewritten
// as the JSON it stands for, each value on its YAML line (yaml.go), and
// read by ParseFile, so its errors name its own lines; YAML's extras
// (anchors, aliases, hex and infinite numbers) are refused.
//
// Example:
//
//	{
//	  "rules": [
//	    {"tool": "deploy_*", "mode": "task-required", "ttl": "2h", "pollInterval": "10s"},
//	    {"tool": "*", "annotations": {"readOnlyHint": true}, "mode": "sync"},
//	    {"tool": "github/*", "annotations": {"openWorldHint": true, "destructiveHint": true}, "mode": "task"},
//	    {"tool": "report_*", "mode": "task", "hybridWait": "500ms"},
//	    {"tool": "search", "mode": "auto", "hybridWait": "3s"}
//	  ]
//	}
//
// Each rule has:
//   - "tool": a glob on the tool name (path.Match syntax where * and ?
//     also match "/"); default "*".
//   - "annotations" (optional): conditions on the tool's annotations from
//     tools/list, readOnlyHint, destructiveHint, idempotentHint and
//     openWorldHint, each true or false. An absent annotation takes the
//     spec's default (readOnlyHint false, destructiveHint true,
//     idempotentHint false, openWorldHint true), and a read-only tool
//     counts as non-destructive and idempotent.
//   - "mode" (required): "task", "task-required", "sync" (as the flags), or
//     "auto": what a tool no rule matches gets, but later rules are not
//     tried and this rule's settings apply.
//   - "ttl", "pollInterval" (optional, not on sync rules): Go durations
//     ("90s", "2h") for the tasks the rule creates.
//   - "hybridWait" (optional, task and auto rules): a modern client's call
//     is held this long before it becomes a task; on a task rule this makes
//     it a hybrid call for modern clients (2025-11-25 clients still see
//     "optional").
//
// # Latency
//
// Histogram is a mergeable log-bucket sketch of a tool's durations;
// Latencies keeps one per tool for a replica (its own observations plus
// the merged ones of other replicas) and gives Stats for Decide.
package policy
