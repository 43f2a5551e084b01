package mcpwire

// CarriesUnrelated reports whether a client request of method, while it is
// a session's one call in flight, may carry a request of the server that
// names no call of its own: a stdio child's or an HTTP+SSE server's
// roots/list, elicitation/create or sampling/createMessage, whose
// transport cannot say which request it serves.
//
// The requests a server asks its questions for: tools/call, resources/read
// and prompts/get. Servers "MUST send server-to-client requests (such as
// roots/list, sampling/createMessage, or elicitation/create) only in
// association with an originating client request (e.g., during tools/call,
// resources/read, or prompts/get processing)" (SEP-2260). In Streamable
// HTTP the server MAY send requests on a POST's response stream, and
// "these messages SHOULD relate to the originating client request" (MCP
// 2025-11-25, Basic, Transports, "Sending Messages to the Server"); what
// relates to no request goes on the GET stream ("Listening for Messages
// from the Server"). A tools/list, initialize, ping, resources/list or
// completion/complete in flight is most likely not what asked (a server
// asks for roots at connect time, while the client lists what it offers):
// its stream closes with its answer, and a question riding it would be
// lost before the client answers. Such a question waits for the session's
// GET stream.
func CarriesUnrelated(method string) bool {
	switch method {
	case "tools/call", "resources/read", "prompts/get":
		return true
	}
	return false
}
