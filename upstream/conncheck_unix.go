//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package upstream

import (
	"errors"
	"net"
	"syscall"

	"golang.org/x/sys/unix"
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

// canWait: waitReadable can watch a socket here.
const canWait = true

// waitReadable returns once conn's socket has bytes to read, has ended or
// failed, or was closed: the netpoller's wait, with a test of the socket
// that neither reads nor clears anything (poll(2), not a peek: a peek
// would take a pending error such as a reset, and the reader after it
// would find a plain end of stream), so whoever reads conn next finds
// what it would have found. It returns at once for a connection that is
// not a socket.
func waitReadable(conn net.Conn) {
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return
	}
	_ = raw.Read(readable)
}

// readable is waitReadable's test of the socket: true (stop waiting)
// unless reading it now would block.
func readable(fd uintptr) bool {
	fds := [1]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	for {
		n, err := unix.Poll(fds[:], 0)
		switch {
		case err == unix.EINTR:
			continue
		case err != nil:
			return true // cannot tell: the reader finds out
		}
		// POLLIN: bytes or the end of the stream; POLLERR, POLLHUP: a
		// failure, a hang-up (reported whatever was asked).
		return n > 0 && fds[0].Revents != 0
	}
}
