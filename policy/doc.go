// Package policy decides, per tools/call, whether the gateway forwards the
// call synchronously or turns it into a task. It is pure: no I/O, no clocks
// read, no globals. The gateway gives it the tool, the rules, what the client
// declared and the tool's observed latency; it returns a decision.
//
// The decision table is in ../shared/DESIGN.md ("How a tools/call is decided").
package policy
