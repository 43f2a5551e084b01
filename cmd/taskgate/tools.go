package main

// taskgate tools: the operator's view of the policy. It connects to the
// upstream like a client (initialize at 2025-11-25, then every page of
// tools/list), reads the tool latencies the replicas learned from
// --redis-url when given, and prints one row per tool with what
// policy.Decide makes of it for each kind of client. Progress goes to
// stderr, the table (or --json) to stdout.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/rs/zerolog"
	"github.com/urfave/cli/v2"

	"github.com/taskgate/taskgate/gateway"
	"github.com/taskgate/taskgate/policy"
	"github.com/taskgate/taskgate/taskstore"
	"github.com/taskgate/taskgate/upstream"
)

func toolsCommand() *cli.Command {
	return &cli.Command{
		Name:  "tools",
		Usage: "list the --upstream server's tools with what the policy decides for each (legacy and modern clients)",
		Flags: append(append([]cli.Flag{
			&cli.StringFlag{Name: "upstream", Category: catUpstream, EnvVars: env("upstream"),
				Usage: "`URL` of the MCP server, as for serve (this or --upstream-command is required)"},
			&cli.StringFlag{Name: "redis-url", Category: catStore, EnvVars: env("redis-url"),
				Usage: "`URL` of the running replicas' Redis, to show the latencies they learned (p50/p95) and decide with them"},
			&cli.DurationFlag{Name: "default-ttl", Category: catTasks, Value: taskstore.DefaultTTL, EnvVars: env("default-ttl"),
				Usage: "task lifetime when no rule sets one, as for serve"},
			&cli.DurationFlag{Name: "poll-interval", Category: catTasks, Value: taskstore.DefaultPollInterval, EnvVars: env("poll-interval"),
				Usage: "pollInterval when neither a rule nor learned latency sets one, as for serve"},
			&cli.StringSliceFlag{Name: "header", Category: catUpstream,
				Usage: `HTTP header sent to the upstream, "Name: value" (e.g. "Authorization: Bearer …"); repeatable`},
			&cli.DurationFlag{Name: "timeout", Value: 30 * time.Second,
				Usage: "how long listing the tools may take"},
			&cli.BoolFlag{Name: "json", Usage: "print JSON instead of a table"},
		}, append(ruleFlags(), policyFlags(false)...)...), append(caAlias(upstreamFlags()), stdioFlags(false)...)...),
		Action: tools,
	}
}

// caAlias gives --upstream-ca among flags the short name --ca, as
// taskgate call has: tools talks to nothing but its upstream.
func caAlias(flags []cli.Flag) []cli.Flag {
	for i, f := range flags {
		if sf, ok := f.(*cli.StringFlag); ok && sf.Name == "upstream-ca" {
			alias := *sf
			alias.Aliases = []string{"ca"}
			flags[i] = &alias
		}
	}
	return flags
}

func tools(c *cli.Context) error {
	up, err := openUpstream(c, humanLog(c.App.ErrWriter), nil)
	if err != nil {
		return err
	}
	defer up.close(context.Background())
	header, err := headerFlag(c.StringSlice("header"))
	if err != nil {
		return err
	}
	for _, name := range []string{"default-ttl", "poll-interval", "timeout"} {
		if c.Duration(name) <= 0 {
			return fmt.Errorf("invalid --%s %s: it must be positive", name, c.Duration(name))
		}
	}
	rules, err := taskRules(c)
	if err != nil {
		return err
	}
	src, err := newPolicySource(c, rules)
	if err != nil {
		return err
	}
	data, err := src.read()
	if err != nil {
		return err
	}
	cfg, err := src.build(data)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(c.Context, c.Duration("timeout"))
	defer cancel()
	progress := c.App.ErrWriter

	fmt.Fprintf(progress, "listing the tools of %s\n", up.name)
	list, version, err := listToolsAt(ctx, up.Client, header)
	if err != nil {
		return err
	}
	fmt.Fprintf(progress, "%d tools\n", len(list))
	presented := gateway.PresentsTasks(version)
	if version != "" && version != "2025-11-25" && version != "2026-07-28" {
		what := "presented to 2025-11-25 clients as 2025-11-25, with the gateway's tasks"
		if !presented {
			what = "passed through to its clients unchanged: no tasks for them"
		}
		fmt.Fprintf(progress, "the upstream speaks %s: %s\n", version, what)
	}

	var stats map[string]policy.Histogram
	if url := c.String("redis-url"); url != "" {
		if stats, err = loadStats(ctx, url); err != nil {
			return err
		}
		fmt.Fprintf(progress, "learned latencies of %d tools from %s\n", len(stats), taskstore.RedactURL(url))
	}
	rows := decideTools(cfg, list, stats, c.Duration("default-ttl"))
	if !presented {
		for i := range rows {
			rows[i].Legacy = "none"
			rows[i].Reason = joinReasons("the upstream speaks "+version+", which taskgate passes through to session clients unchanged", rows[i].Reason)
		}
	}
	if c.Bool("json") {
		enc := json.NewEncoder(c.App.Writer)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false)
		return enc.Encode(rows)
	}
	return printTools(c.App.Writer, rows, stats != nil)
}

// headerFlag reads the --header values.
func headerFlag(values []string) (http.Header, error) {
	h := http.Header{}
	for _, v := range values {
		name, val, ok := strings.Cut(v, ":")
		name = strings.TrimSpace(name)
		if !ok || name == "" || strings.ContainsAny(name, " \t") {
			return nil, fmt.Errorf(`invalid --header %q: want "Name: value"`, v)
		}
		h.Add(name, strings.TrimSpace(val))
	}
	return h, nil
}

// listedTool is one tool of the upstream's tools/list.
type listedTool struct {
	Name        string             `json:"name"`
	Annotations policy.Annotations `json:"annotations"`
	Execution   struct {
		TaskSupport policy.TaskSupport `json:"taskSupport"`
	} `json:"execution"`
}

// maxToolPages bounds the tools/list pages read, against a cursor loop.
const maxToolPages = 1000

// listTools opens a 2025-11-25 session (the gateway's own legacy clients'
// view; the upstream may choose an older version) and reads every page of
// tools/list. An upstream that refuses initialize is asked once more as a
// stateless 2026-07-28 server.
func listTools(ctx context.Context, up *upstream.Client, header http.Header) ([]listedTool, error) {
	list, _, err := listToolsAt(ctx, up, header)
	return list, err
}

// listToolsAt is listTools, and the protocol version the upstream spoke:
// the one it chose at initialize, or 2026-07-28.
func listToolsAt(ctx context.Context, up *upstream.Client, header http.Header) ([]listedTool, string, error) {
	params, _ := json.Marshal(map[string]any{
		"protocolVersion": "2025-11-25",
		"capabilities":    map[string]any{},
		"clientInfo":      map[string]any{"name": "taskgate-tools", "version": buildVersion()},
	})
	sess, _, err := up.Initialize(ctx, header, params)
	if err == nil {
		defer func() { _ = up.CloseSession(context.WithoutCancel(ctx), sess) }()
		list, err := listPages(ctx, up, sess, nil)
		return list, sess.ProtocolVersion, err
	}
	if upstream.Fault(err) == upstream.FaultTLS {
		return nil, "", fmt.Errorf("cannot list the tools of %s: %v; its certificate is %s: give the CA that signs it with --ca FILE (PEM)",
			up.URL(), err, upstream.CertificateWhy(err))
	}
	if errors.Is(err, upstream.ErrUnreachable) || ctx.Err() != nil {
		return nil, "", fmt.Errorf("cannot list the tools of %s: %v", up.URL(), err)
	}
	list, merr := listPages(ctx, up, &upstream.Session{ProtocolVersion: "2026-07-28", Header: header}, map[string]any{
		"io.modelcontextprotocol/protocolVersion":    "2026-07-28",
		"io.modelcontextprotocol/clientCapabilities": map[string]any{},
		"io.modelcontextprotocol/clientInfo":         map[string]any{"name": "taskgate-tools", "version": buildVersion()},
	})
	if merr != nil {
		return nil, "", fmt.Errorf("cannot list the tools of %s: initialize: %v%s", up.URL(), err, notMCPHint(up.URL(), err))
	}
	return list, "2026-07-28", nil
}

// listPages reads every page of tools/list on sess; meta, when set, is the
// per-request _meta of a 2026-07-28 request.
func listPages(ctx context.Context, up *upstream.Client, sess *upstream.Session, meta map[string]any) ([]listedTool, error) {
	var out []listedTool
	cursor := ""
	for page := 0; page < maxToolPages; page++ {
		p := map[string]any{}
		if cursor != "" {
			p["cursor"] = cursor
		}
		if meta != nil {
			p["_meta"] = meta
		}
		raw, _ := json.Marshal(p)
		id, _ := jsonrpc.MakeID(fmt.Sprintf("taskgate-tools-%d", page))
		resp, err := up.Call(ctx, sess, &jsonrpc.Request{ID: id, Method: "tools/list", Params: raw}, upstream.CallOptions{})
		if err == nil && resp.Error != nil {
			err = resp.Error
		}
		var res struct {
			Tools      []listedTool `json:"tools"`
			NextCursor string       `json:"nextCursor"`
		}
		if err == nil {
			err = json.Unmarshal(resp.Result, &res)
		}
		if err != nil {
			return nil, fmt.Errorf("tools/list of %s: %v", up.URL(), err)
		}
		out = append(out, res.Tools...)
		if res.NextCursor == "" || res.NextCursor == cursor {
			return out, nil
		}
		cursor = res.NextCursor
	}
	return nil, fmt.Errorf("tools/list of %s: more than %d pages", up.URL(), maxToolPages)
}

// loadStats reads the latencies every replica published to Redis.
func loadStats(ctx context.Context, url string) (map[string]policy.Histogram, error) {
	rdb, err := taskstore.Dial(ctx, url)
	if errors.Is(err, taskstore.ErrUnavailable) {
		return nil, fmt.Errorf("cannot reach Redis at --redis-url %s: %s", taskstore.RedactURL(url), lastCause(err))
	}
	if err != nil {
		return nil, fmt.Errorf("invalid --redis-url: %s", strings.TrimPrefix(err.Error(), "taskstore: "))
	}
	defer rdb.Close()
	store := taskstore.New(rdb, taskstore.Options{})
	defer store.Close()
	stats, err := gateway.FleetLatencies(ctx, store, "")
	if err != nil {
		return nil, fmt.Errorf("cannot read the learned latencies from --redis-url %s: %s", taskstore.RedactURL(url), lastCause(err))
	}
	return stats, nil
}

// toolRow is one tool's line of the table, and its JSON object.
type toolRow struct {
	Tool string `json:"tool"`
	// Legacy is the execution.taskSupport a 2025-11-25 client sees:
	// optional, required, forbidden or none.
	Legacy string `json:"legacy"`
	// Modern is what a 2026-07-28 client with the tasks extension gets:
	// sync, task or auto (held HybridWaitMs before it becomes a task).
	Modern string `json:"modern"`
	// Tasks says whose a task of the tool is: "native" (the upstream's
	// own: it declared taskSupport, and no rule takes the tool over),
	// "gateway+native" (a rule took a native tool over: the gateway's
	// task holds the upstream's), or "gateway" (only the gateway's).
	Tasks string `json:"tasks"`
	// Rerun: a task of the tool runs again when its replica or the
	// upstream fails under it (docs/durable.md); the reason says why.
	Rerun        bool   `json:"rerun"`
	HybridWaitMs int64  `json:"hybridWaitMs,omitempty"`
	Reason       string `json:"reason"`
	// TTLMs and PollIntervalMs are what a task of the tool gets; absent
	// when no client can make it a task.
	TTLMs          int64 `json:"ttlMs,omitempty"`
	PollIntervalMs int64 `json:"pollIntervalMs,omitempty"`
	// Samples, P50Ms and P95Ms are the learned latency (with
	// --redis-url): the observations the replicas hold (old ones decay).
	Samples int   `json:"samples,omitempty"`
	P50Ms   int64 `json:"p50Ms,omitempty"`
	P95Ms   int64 `json:"p95Ms,omitempty"`
}

// decideTools decides every tool for both client flavours, in the
// upstream's order.
func decideTools(cfg *policy.Config, list []listedTool, stats map[string]policy.Histogram, defaultTTL time.Duration) []toolRow {
	rows := make([]toolRow, 0, len(list))
	for _, t := range list {
		var st policy.Stats
		if h, ok := stats[t.Name]; ok {
			st = h.Stats()
		}
		tool := policy.Tool{Name: t.Name, Annotations: t.Annotations}
		legacy := policy.Decide(cfg, tool, policy.Client2025, t.Execution.TaskSupport, st)
		modern := policy.Decide(cfg, tool, policy.Client2026, t.Execution.TaskSupport, st)
		native, ruled := policy.Native(cfg, tool, t.Execution.TaskSupport)
		reason := joinReasons(legacy.Reason, modern.Reason)
		owner := "gateway"
		switch {
		case native && ruled:
			owner = "gateway+native"
			reason = joinReasons(reason, fmt.Sprintf("the upstream declares taskSupport %q, a rule takes it over: the gateway's task holds the upstream's", t.Execution.TaskSupport))
		case native:
			owner = "native"
			reason = joinReasons(fmt.Sprintf("native: the upstream declares taskSupport %q and runs its tasks", t.Execution.TaskSupport), reason)
		}
		rerun, why := policy.Rerunnable(cfg, tool)
		if rerun {
			reason = joinReasons(reason, "rerun: "+why)
		} else {
			reason = joinReasons(reason, "no rerun: "+why)
		}
		row := toolRow{
			Rerun:   rerun,
			Tool:    t.Name,
			Legacy:  string(legacy.TaskSupport),
			Modern:  modern.Mode.String(),
			Tasks:   owner,
			Reason:  reason,
			Samples: st.Count,
			P50Ms:   st.P50.Round(time.Millisecond).Milliseconds(),
			P95Ms:   st.P95.Round(time.Millisecond).Milliseconds(),
		}
		if row.Legacy == "" {
			row.Legacy = "none"
		}
		if modern.Mode == policy.Auto {
			row.HybridWaitMs = modern.HybridWait.Milliseconds()
		}
		if legacy.TaskSupport.AllowsTask() || modern.Mode != policy.Sync {
			ttl := modern.TTL
			if ttl == 0 {
				ttl = defaultTTL
			}
			row.TTLMs, row.PollIntervalMs = ttl.Milliseconds(), modern.PollInterval.Round(time.Millisecond).Milliseconds()
		}
		rows = append(rows, row)
	}
	return rows
}

// joinReasons merges the legacy and the modern decision's reasons, which
// share their first parts (the rule, the latency), without repeating them.
func joinReasons(reasons ...string) string {
	var parts []string
	seen := map[string]bool{}
	for _, r := range reasons {
		for _, p := range strings.Split(r, "; ") {
			if p != "" && !seen[p] {
				seen[p] = true
				parts = append(parts, p)
			}
		}
	}
	return strings.Join(parts, "; ")
}

// printTools writes the table; withStats adds the learned latency columns.
func printTools(w io.Writer, rows []toolRow, withStats bool) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	head := "TOOL\t2025-11-25\t2026-07-28\tTASKS\tRERUN\tTTL\tPOLL" // the clients of each protocol revision
	if withStats {
		head += "\tSAMPLES\tP50\tP95"
	}
	fmt.Fprintln(tw, head+"\tREASON")
	for _, r := range rows {
		modern := r.Modern
		if r.Modern == "auto" {
			modern += " " + ms(r.HybridWaitMs)
		}
		rerun := "no"
		if r.Rerun {
			rerun = "yes"
		}
		line := r.Tool + "\t" + r.Legacy + "\t" + modern + "\t" + r.Tasks + "\t" + rerun + "\t" + ms(r.TTLMs) + "\t" + ms(r.PollIntervalMs)
		if withStats {
			n := "-"
			if r.Samples > 0 {
				n = fmt.Sprint(r.Samples)
			}
			line += "\t" + n + "\t" + ms(r.P50Ms) + "\t" + ms(r.P95Ms)
		}
		fmt.Fprintln(tw, line+"\t"+r.Reason)
	}
	return tw.Flush()
}

// ms prints a millisecond count as a short duration ("2h", "1m30s",
// "250ms"), "-" for none.
func ms(n int64) string {
	if n <= 0 {
		return "-"
	}
	s := (time.Duration(n) * time.Millisecond).String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// humanLog is the logger of a command an operator runs by hand (tools):
// warnings and errors as plain lines ("WRN message key=value") on w, not
// serve's JSON, which is for log collectors.
func humanLog(w io.Writer) zerolog.Logger {
	return zerolog.New(zerolog.ConsoleWriter{Out: w, NoColor: !isTerminal(w), PartsExclude: []string{zerolog.TimestampFieldName}}).
		Level(zerolog.WarnLevel)
}

// notMCPHint is "; did you mean …/mcp?" (or the path to check) when the
// upstream answered an initialize with 404 or 405, the answers of a URL
// that is no MCP endpoint (MCP 2025-11-25, Transports, Streamable HTTP).
func notMCPHint(rawURL string, err error) string {
	var se *upstream.StatusError
	if errors.As(err, &se) && (se.Status == http.StatusNotFound || se.Status == http.StatusMethodNotAllowed) {
		return "; " + upstream.PathHint(rawURL)
	}
	return ""
}
