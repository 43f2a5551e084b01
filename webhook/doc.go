// Package webhook sends signed webhooks about tasks to the endpoints the
// operator configured (--webhook-url, --webhooks FILE; docs/webhooks.md).
//
// Events are recorded by the task store in the same script as the status
// change they announce (taskstore, the owner's outbox stream); this
// package only reads them back and delivers them, on its own goroutines,
// so a slow or dead receiver never slows task handling.
//
// Files:
//
//	endpoint.go   Endpoint, its checks and filters (events, tool globs, principals)
//	file.go       the --webhooks JSON file, strict, with precise errors
//	sign.go       Standard Webhooks signatures: Sign, SignatureHeader, Verify
//	render.go     the payload (Render): metadata only, never arguments, answers or results
//	dispatcher.go Config, Dispatcher: Start, Stop, SetEndpoints (reloads)
//	dispatch.go   outboxes → per-endpoint queues, once per endpoint and event
//	deliver.go    per-endpoint delivery loops: claim, sign, POST, done/retry/dead
//	backoff.go    exponential backoff with full jitter
//	breaker.go    per-endpoint circuit breaker: one probe at a time while failing
//	deadletters.go what the console needs: Stats, DeadLetters, RetryDead
//	metrics.go    taskgate_webhook_deliveries_total, _delivery_seconds, _endpoint_open
//	trace.go      a client span per delivery, linked to the task's trace
//
// The Dispatcher needs of the store only the Store interface
// (taskstore.Store implements it). Its loops are its own goroutines:
// Start starts them, Stop ends them and waits; the gateway does both.
package webhook
