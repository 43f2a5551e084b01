//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package upstream

import "net"

// connCheck cannot peek at a socket here: an idle connection counts as
// alive, and a stale one fails its request (a POST is not sent twice).
func connCheck(net.Conn, bool) bool { return true }

// canWait: a socket cannot be watched here without reading it.
const canWait = false

func waitReadable(net.Conn) {}
