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
	wmu   sync.Mutex

	init    json.RawMessage // the initialize result
	version string          // the protocol version it chose

	initDone chan json.RawMessage // the answer to initialize (response message)
	exited   chan struct{}        // closed once the process has exited
	exitErr  error                // why, set before exited closes
	killedBy string               // set when the bridge killed it: why
	kmu      sync.Mutex
}

// procOptions start a proc.
type procOptions struct {
	argv    []string
	env     []string
	dir     string
	maxLine int
	log     zerolog.Logger
	// dispatch gets every JSON-RPC message on stdout but the answer to
	// the bridge's initialize, in order, on the reader goroutine.
	dispatch func(p *proc, msg []byte)
}

// startProc starts the child and its reader goroutines. It does not
// initialize it (handshake).
func startProc(o procOptions) (*proc, error) {
	cmd := exec.Command(o.argv[0], o.argv[1:]...)
	cmd.Env = append(os.Environ(), o.env...)
	cmd.Dir = o.dir
	// Its own process group: a signal to the gateway's group (Ctrl-C in a
	// terminal) does not reach it first; the bridge stops it in order.
	cmd.SysProcAttr = procAttr()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("cannot start %s: %w", o.argv[0], unwrapExec(err))
	}
	p := &proc{log: o.log.With().Int("pid", cmd.Process.Pid).Logger(), cmd: cmd, stdin: stdin,
		initDone: make(chan json.RawMessage, 1), exited: make(chan struct{})}
	var readers sync.WaitGroup
	readers.Add(2)
	go func() { defer readers.Done(); p.readStderr(stderr) }()
	go func() { defer readers.Done(); p.readStdout(stdout, o.maxLine, o.dispatch) }()
	go func() {
		readers.Wait() // Wait closes the pipes: read them to the end first
		err := cmd.Wait()
		p.exitErr = exitError(err, p.killReason())
		close(p.exited)
	}()
	return p, nil
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

// alive reports whether the child is running and not being stopped.
func (p *proc) alive() bool {
	select {
	case <-p.exited:
		return false
	default:
	}
	return p.killReason() == ""
}

func (p *proc) killReason() string {
	p.kmu.Lock()
	defer p.kmu.Unlock()
	return p.killedBy
}

// kill stops the child at once, saying why (the reason becomes exitErr).
func (p *proc) kill(why string) {
	p.kmu.Lock()
	if p.killedBy == "" {
		p.killedBy = why
	}
	p.kmu.Unlock()
	_ = p.cmd.Process.Kill()
}

// stop ends the child gently: stdin closed and SIGTERM, then SIGKILL once
// ctx ends. It returns when the child has exited.
func (p *proc) stop(ctx context.Context, why string) {
	p.kmu.Lock()
	if p.killedBy == "" {
		p.killedBy = why
	}
	p.kmu.Unlock()
	_ = p.stdin.Close()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-ctx.Done():
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}

// send writes one message, newline-terminated. Messages are written whole,
// one at a time.
func (p *proc) send(msg []byte) error {
	if bytes.IndexByte(msg, '\n') >= 0 {
		msg = compact(msg)
	}
	p.wmu.Lock()
	defer p.wmu.Unlock()
	buf := make([]byte, 0, len(msg)+1)
	buf = append(append(buf, msg...), '\n')
	if _, err := p.stdin.Write(buf); err != nil {
		return fmt.Errorf("cannot write to the upstream process: %w", err)
	}
	return nil
}

// compact removes the insignificant newlines a stdio message must not hold.
func compact(msg []byte) []byte {
	var b bytes.Buffer
	if json.Compact(&b, msg) != nil {
		return bytes.ReplaceAll(msg, []byte("\n"), []byte(" "))
	}
	return b.Bytes()
}

// readStdout reads messages until EOF. A line longer than maxLine kills
// the child (a server that sends one is broken, and the stream cannot be
// resynchronised cheaply); a line that is not a JSON-RPC message is logged
// and skipped.
func (p *proc) readStdout(r io.Reader, maxLine int, dispatch func(*proc, []byte)) {
	br := bufio.NewReaderSize(r, 64<<10)
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		if len(line)+len(chunk) > maxLine+1 {
			p.log.Error().Str("op", "stdio").Int("limit_bytes", maxLine).
				Msg("the upstream process wrote a line longer than --max-body; restarting it")
			p.kill(fmt.Sprintf("it wrote a line longer than %d bytes", maxLine))
			_, _ = io.Copy(io.Discard, br)
			return
		}
		line = append(line, chunk...)
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if msg := bytes.TrimSpace(line); len(msg) > 0 {
			p.handleLine(msg, dispatch)
		}
		line = line[:0]
		if err != nil {
			return
		}
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

// readStderr logs the child's stderr line by line.
func (p *proc) readStderr(r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 4096), 1<<20)
	for sc.Scan() {
		if line := bytes.TrimRight(sc.Bytes(), "\r"); len(line) > 0 {
			p.log.Info().Str("op", "upstream_stderr").Str("line", truncate(line)).Msg("upstream process")
		}
	}
	if err := sc.Err(); err != nil { // a line over 1 MiB: keep draining
		_, _ = io.Copy(io.Discard, r)
	}
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
