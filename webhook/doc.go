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
package webhook
