package stdio

// One child process speaking MCP over stdio (MCP 2025-11-25, Transports,
// "stdio"): newline-delimited JSON-RPC messages on stdin and stdout, never
// an embedded newline; anything on stderr is the server's own logging.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/rs/zerolog"
)

// initID is the id of the initialize request the bridge sends itself.
const initID = `"taskgate-stdio-initialize"`

// maxLogged bounds how much of a line of the child's stderr, or of a
// stdout line that is not JSON-RPC, goes into one log line.
const maxLogged = 2048

// proc is one running child.
type proc struct {
	log   zerolog.Logger
	cmd   *exec.Cmd
	stdin io.WriteCloser
	queue chan []byte // messages for stdin, written in order by writeLoop

	init    json.RawMessage // the initialize result
	version string          // the protocol version it chose

	sess *session // the session it serves; nil: the shared child (the bridge's, set once), or a principal's
	// principal is whose sessions it serves (principal.go); "" unless a
	// principal's child. Guarded by Bridge.mu.
	principal string
	// forgotten: its exit was processed (Bridge.forget), which ended the
	// sessions on it then; guarded by Bridge.mu.
	forgotten bool

	initDone chan json.RawMessage // the answer to initialize (response message)
	exited   chan struct{}        // closed once the process has exited
	exitErr  error                // why, set before exited closes
	killedBy string               // set when the bridge stopped it: why
	kmu      sync.Mutex
}

// procOptions start a proc.
type procOptions struct {
	sess    *session
	argv    []string
	env     []string
	dir     string
	maxLine int
	log     zerolog.Logger
	// dispatch gets every JSON-RPC message on stdout but the answer to
	// the bridge's initialize, in order, on the reader goroutine. It must
	// not block.
	dispatch func(p *proc, msg []byte)
	// answer takes an answer too large to hold (large.go), streamed from a
	// file, for the call id names; false: no such call (it is then read
	// back and dispatched). It must not block.
	answer func(p *proc, id []byte, a *bigAnswer) bool
	// failCall fails the call id names with err, its answer being over
	// the limit or malformed; false: no such call.
	failCall func(p *proc, id []byte, err error) bool
}

// queueLen bounds the messages waiting for the child to read its stdin;
// past it, sends fail at once rather than stall the caller.
const queueLen = 1024

// pipeGrace is how long the child's pipes are still read after it exited:
// a process it started (in its group) may hold them open.
const pipeGrace = 2 * time.Second

// startProc starts the child, its writer and its reader goroutines. It does
// not initialize it (handshake).
func startProc(o procOptions) (*proc, error) {
	cmd := exec.Command(o.argv[0], o.argv[1:]...)
	cmd.Env = append(os.Environ(), o.env...)
	cmd.Dir = o.dir
	// Its own process group, signalled as a whole: helpers it starts stop
	// with it, and a Ctrl-C meant for the gateway does not reach it first.
	cmd.SysProcAttr = procAttr()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	// Our own pipes for its output (not StdoutPipe): Wait then returns when
	// the process exits, even if a process it started holds them open.
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = outW, errW
	err = cmd.Start()
	outW.Close() // the child has its own copies
	errW.Close()
	if err != nil {
		outR.Close()
		errR.Close()
		return nil, fmt.Errorf("cannot start %s: %w", o.argv[0], unwrapExec(err))
	}
	p := &proc{log: o.log.With().Int("pid", cmd.Process.Pid).Logger(), cmd: cmd, stdin: stdin, sess: o.sess,
		queue: make(chan []byte, queueLen), initDone: make(chan json.RawMessage, 1), exited: make(chan struct{})}
	var readers sync.WaitGroup
	readers.Add(2)
	go func() { defer readers.Done(); p.readStderr(errR) }()
	go func() { defer readers.Done(); p.readStdout(outR, o.maxLine, o) }()
	go p.writeLoop()
	go func() {
		err := cmd.Wait()
		// What it wrote before it exited is still read; a process it left
		// behind holding the pipes gets pipeGrace, then the group is killed
		// and the pipes closed.
		read := make(chan struct{})
		go func() { readers.Wait(); close(read) }()
		select {
		case <-read:
		case <-time.After(pipeGrace):
			p.signal(syscall.SIGKILL)
			outR.Close()
			errR.Close()
			<-read
		}
		p.exitErr = exitError(err, p.killReason())
		close(p.exited)
	}()
	return p, nil
}

// signal sends sig to the child's process group (to the child alone where
// there is none).
func (p *proc) signal(sig syscall.Signal) {
	if err := syscall.Kill(-p.cmd.Process.Pid, sig); err != nil {
		_ = p.cmd.Process.Signal(sig)
	}
}

// writeLoop writes the queued messages to the child's stdin, in order.
// A write fails once the child is gone (Wait closes the pipe) or stop
// closed it; the loop then ends and later sends fail.
func (p *proc) writeLoop() {
	for {
		select {
		case msg := <-p.queue:
			if _, err := p.stdin.Write(msg); err != nil {
				return
			}
		case <-p.exited:
			return
		}
	}
}

// checkDir is the error a child's start in dir would get when dir is
// not a directory it can start in (startProc's, for a bridge that starts
// no child at Start).
func checkDir(command, dir string) error {
	if dir == "" {
		return nil
	}
	fi, err := os.Stat(dir)
	switch {
	case err != nil:
		return fmt.Errorf("cannot start %s: %w", command, unwrapExec(err))
	case !fi.IsDir():
		return fmt.Errorf("cannot start %s: %s: not a directory", command, dir)
	}
	return nil
}

// unwrapExec makes exec's "fork/exec /x: permission denied" one clause.
func unwrapExec(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s: %v", pe.Path, pe.Err)
	}
	return err
}

// exitError says how the child ended, for task failures and logs.
func exitError(err error, killed string) error {
	var ee *exec.ExitError
	switch {
	case killed != "":
		return fmt.Errorf("the upstream process was stopped: %s", killed)
	case err == nil:
		return errors.New("the upstream process exited with status 0")
	case errors.As(err, &ee):
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return fmt.Errorf("the upstream process was killed by signal %s", ws.Signal())
		}
		return fmt.Errorf("the upstream process exited with status %d", ee.ExitCode())
	}
	return fmt.Errorf("the upstream process ended: %v", err)
}

func (p *proc) killReason() string {
	p.kmu.Lock()
	defer p.kmu.Unlock()
	return p.killedBy
}

// alive reports whether the child is running and not being stopped.
func (p *proc) alive() bool {
	select {
	case <-p.exited:
		return false
	default:
	}
	return p.killReason() == ""
}

func (p *proc) setKilled(why string) {
	p.kmu.Lock()
	defer p.kmu.Unlock()
	if p.killedBy == "" {
		p.killedBy = why
	}
}

// kill stops the child and its group at once, saying why (the reason
// becomes exitErr).
func (p *proc) kill(why string) {
	p.setKilled(why)
	p.signal(syscall.SIGKILL)
}

// stop ends the child gently: stdin closed and SIGTERM to its group, then
// SIGKILL once ctx ends. It returns when the child has exited.
func (p *proc) stop(ctx context.Context, why string) {
	p.setKilled(why)
	_ = p.stdin.Close()
	p.signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-ctx.Done():
		p.signal(syscall.SIGKILL)
		<-p.exited
	}
}

// send queues one message for the child's stdin, newline-terminated. It
// never blocks: a child that does not read its input makes it fail.
func (p *proc) send(msg []byte) error {
	if !p.alive() {
		return errors.New("the upstream process is not running")
	}
	if bytes.IndexByte(msg, '\n') >= 0 {
		msg = compact(msg)
	}
	buf := make([]byte, 0, len(msg)+1)
	buf = append(append(buf, msg...), '\n')
	select {
	case p.queue <- buf:
		return nil
	default:
		return fmt.Errorf("the upstream process is not reading its input (%d messages queued)", queueLen)
	}
}

// compact removes the insignificant newlines a stdio message must not hold.
func compact(msg []byte) []byte {
	var b bytes.Buffer
	if json.Compact(&b, msg) != nil {
		return bytes.ReplaceAll(msg, []byte("\n"), []byte(" "))
	}
	return b.Bytes()
}

// readStdout reads messages until EOF. A line past spillAt goes to a file
// (large.go) rather than memory; one longer than maxLine is discarded as
// it is read and fails only the request it answers: the child keeps
// running. A line that is not a JSON-RPC message is logged and skipped.
func (p *proc) readStdout(r io.Reader, maxLine int, o procOptions) {
	br := bufio.NewReaderSize(r, 64<<10)
	var line []byte
	var big *bigLine
	for {
		chunk, err := br.ReadSlice('\n')
		switch {
		case big != nil:
			big.write(chunk, int64(maxLine))
		case len(line)+len(chunk) > min(spillAt, maxLine+1):
			big = newBigLine(line)
			big.write(chunk, int64(maxLine))
			line = line[:0]
		default:
			line = append(line, chunk...)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if big != nil {
			p.handleBig(big, o)
			big = nil
		} else if msg := bytes.TrimSpace(line); len(msg) > 0 {
			p.handleLine(msg, o.dispatch)
		}
		if cap(line) > spillAt {
			line = nil // a line near spillAt is not kept for the next
		}
		line = line[:0]
		if err != nil {
			return
		}
	}
}

// handleBig passes on a line that went to a file: an answer streamed from
// it, anything else read back; one over the limit fails the request it
// answers, and is otherwise only logged.
func (p *proc) handleBig(l *bigLine, o procOptions) {
	l.m.end()
	id := l.m.named()
	if l.f == nil {
		ev := p.log.Error().Str("op", "stdio").Int64("line_bytes", l.size).Str("id", string(id)).Err(l.err)
		if id != nil && !l.m.method && o.failCall != nil && o.failCall(p, id, l.err) {
			ev.Msg("the upstream process wrote an answer over the limit; its request failed, the process keeps running")
			return
		}
		ev.Msg("the upstream process wrote a line over the limit; skipped")
		return
	}
	if id != nil && !l.m.method && (l.m.result || l.m.err) && string(id) != initID && o.answer != nil {
		if l.m.depth != 0 || l.m.inStr { // what would be streamed is not one JSON object
			l.discard(errors.New("it is not a complete JSON object"))
			if o.failCall(p, id, l.err) {
				p.log.Error().Str("op", "stdio").Int64("line_bytes", l.size).Msg("the upstream process wrote a malformed answer; its request failed")
			}
			return
		}
		a := &bigAnswer{f: l.f, size: l.size, idStart: l.m.idStart, idEnd: l.m.idEnd}
		// The line's end (its newline, a CR) is not the message's.
		for a.size > a.idEnd {
			var c [1]byte
			if _, err := l.f.ReadAt(c[:], a.size-1); err != nil || (c[0] != '\n' && c[0] != '\r' && c[0] != ' ') {
				break
			}
			a.size--
		}
		if !o.answer(p, id, a) {
			a.release()
			p.log.Debug().Str("op", "stdio").Str("id", string(id)).Msg("a large response to no call in flight; dropped")
		}
		return
	}
	msg, err := l.bytes()
	if err != nil {
		p.log.Error().Str("op", "stdio").Err(err).Msg("cannot read back a large line of the upstream process; skipped")
		return
	}
	if msg = bytes.TrimSpace(msg); len(msg) > 0 {
		p.handleLine(msg, o.dispatch)
	}
}

func (p *proc) handleLine(msg []byte, dispatch func(*proc, []byte)) {
	if !json.Valid(msg) || msg[0] != '{' {
		p.log.Warn().Str("op", "stdio").Str("line", truncate(msg)).Msg("the upstream process wrote a line that is not a JSON-RPC message; skipped")
		return
	}
	var env struct {
		ID json.RawMessage `json:"id"`
	}
	_ = json.Unmarshal(msg, &env)
	if string(env.ID) == initID {
		select {
		case p.initDone <- append([]byte(nil), msg...):
		default:
		}
		return
	}
	dispatch(p, append([]byte(nil), msg...))
}

// Logging of the child's stderr is rate-limited: a child that floods it
// must not flood the gateway's log (nor slow the pipe it must drain).
const (
	stderrRate  = 50  // lines a second, sustained
	stderrBurst = 200 // lines at once
)

// readStderr logs the child's stderr line by line, at most stderrRate a
// second after a burst; what is skipped is counted in the next line logged.
func (p *proc) readStderr(r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 4096), 1<<20)
	tokens, last := float64(stderrBurst), time.Now()
	skipped := 0
	for sc.Scan() {
		line := bytes.TrimRight(sc.Bytes(), "\r")
		if len(line) == 0 {
			continue
		}
		now := time.Now()
		tokens = min(stderrBurst, tokens+now.Sub(last).Seconds()*stderrRate)
		last = now
		if tokens < 1 {
			skipped++
			continue
		}
		tokens--
		if skipped > 0 {
			p.logSkipped(skipped)
			skipped = 0
		}
		p.log.Info().Str("op", "upstream_stderr").Str("line", truncate(line)).Msg("upstream process")
	}
	if skipped > 0 {
		p.logSkipped(skipped)
	}
	if err := sc.Err(); err != nil { // a line over 1 MiB: keep draining
		_, _ = io.Copy(io.Discard, r)
	}
}

func (p *proc) logSkipped(n int) {
	p.log.Warn().Str("op", "upstream_stderr").Int("lines_skipped", n).
		Msgf("the upstream process writes more than %d lines a second to stderr; %d lines were not logged", stderrRate, n)
}

func truncate(b []byte) string {
	if len(b) > maxLogged {
		return string(b[:maxLogged]) + "…"
	}
	return string(b)
}

// handshake initializes the child with params (the initialize request's
// params), then sends notifications/initialized.
func (p *proc) handshake(params json.RawMessage, timeout time.Duration) error {
	req := []byte(`{"jsonrpc":"2.0","id":` + initID + `,"method":"initialize","params":` + string(params) + `}`)
	if err := p.send(req); err != nil {
		return err
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	var answer json.RawMessage
	select {
	case answer = <-p.initDone:
	case <-p.exited:
		return fmt.Errorf("initialize: %w", p.exitErr)
	case <-timer.C:
		return fmt.Errorf("initialize: the upstream process did not answer within %s", timeout)
	}
	var resp struct {
		Result *struct {
			ProtocolVersion string `json:"protocolVersion"`
		} `json:"result"`
		Error *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(answer, &resp); err != nil || (resp.Result == nil && resp.Error == nil) {
		return errors.New("initialize: the upstream process answered with a malformed response")
	}
	if resp.Error != nil {
		return fmt.Errorf("initialize: the upstream process refused: %s (%d)", resp.Error.Message, resp.Error.Code)
	}
	var full struct {
		Result json.RawMessage `json:"result"`
	}
	_ = json.Unmarshal(answer, &full)
	p.init, p.version = full.Result, resp.Result.ProtocolVersion
	return p.send([]byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`))
}
