// Package mcpwire is the JSON-RPC and MCP wire format that taskgate's
// gateway and upstream client share: parsing a POSTed JSON-RPC message,
// small helpers that change one member of a JSON object and keep every
// other byte's meaning, one Server-Sent Events reader and one writer, and
// the one table of JSON-RPC and MCP error codes with the HTTP statuses they
// travel with.
//
// It knows nothing of tasks, Redis or policy. Errors of the packages that
// do (taskstore, upstream) are turned into *Error by the gateway, in one
// function (core.RPCError, gateway/internal/core/errors.go); this package
// only says which HTTP status each code takes.
//
// References: JSON-RPC 2.0; MCP 2025-11-25 and 2026-07-28 (Streamable HTTP
// transport, schema); WHATWG HTML "Server-sent events".
package mcpwire
