//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package upstream

import (
	"errors"
	"net"
	"syscall"
)

// connCheck peeks at conn's socket without blocking: closed by the peer
// (end of stream, a reset) is dead; nothing to read is alive. Bytes
// waiting on a plain connection make it unusable (a server says nothing on
// an idle HTTP/1.1 connection); on TLS they may be a session ticket, so
// only an end or an error counts there.
func connCheck(conn net.Conn, tlsConn bool) bool {
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return true
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	alive := true
	err = raw.Read(func(fd uintptr) bool {
		var b [1]byte
		n, _, rerr := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		switch {
		case rerr != nil:
			alive = errors.Is(rerr, syscall.EAGAIN) || errors.Is(rerr, syscall.EWOULDBLOCK) || errors.Is(rerr, syscall.EINTR)
		case n == 0:
			alive = false // end of stream
		default:
			alive = tlsConn
		}
		return true // never wait for the socket to become readable
	})
	return err == nil && alive
}
