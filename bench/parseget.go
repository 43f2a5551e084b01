package main

// The parse-and-GET limit: the least work any HTTP server backed by the
// same redis-server can do per tasks/get, so taskgate's tasks/get can be
// judged against it rather than against an absolute number. This program,
// re-executed in the "parseget" role, is that server: net/http, the whole
// JSON-RPC body decoded with encoding/json (jsonrpc, id, method, params
// with its taskId; the _meta is skipped by the decoder as taskgate's
// validation must at least read it), one GET with go-redis (default
// options, the same client library and redis-server as taskgate), and the
// value written back as the result of a JSON-RPC response. It checks
// nothing else: no headers, no owner, no protocol version.

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// parseGetPrefix is the key the baseline GETs: the prefix and the request's
// params.taskId. The bench SETs, under it, the JSON of the very result
// taskgate's tasks/get returns for that task, so both answer the same bytes.
const parseGetPrefix = "bench:parseget:"

func serveParseGet(listen, redisAddr string) error {
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	err := rdb.Ping(ctx).Err()
	cancel()
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return err
	}
	return http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 4<<20))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var req struct {
			JSONRPC string          `json:"jsonrpc"`
			ID      json.RawMessage `json:"id"`
			Method  string          `json:"method"`
			Params  struct {
				TaskID string `json:"taskId"`
			} `json:"params"`
		}
		if err := json.Unmarshal(body, &req); err != nil || req.JSONRPC != "2.0" || len(req.ID) == 0 || req.Params.TaskID == "" {
			http.Error(w, "not a JSON-RPC request with params.taskId", http.StatusBadRequest)
			return
		}
		val, err := rdb.Get(r.Context(), parseGetPrefix+req.Params.TaskID).Bytes()
		switch {
		case errors.Is(err, redis.Nil):
			writeParseGet(w, req.ID, nil, `{"code":-32602,"message":"no such task"}`)
		case err != nil:
			writeParseGet(w, req.ID, nil, `{"code":-32603,"message":`+strconv.Quote(err.Error())+`}`)
		default:
			writeParseGet(w, req.ID, val, "")
		}
	}))
}

func writeParseGet(w http.ResponseWriter, id json.RawMessage, result []byte, errObj string) {
	b := make([]byte, 0, len(result)+64)
	b = append(b, `{"jsonrpc":"2.0","id":`...)
	b = append(b, id...)
	if errObj != "" {
		b = append(b, `,"error":`...)
		b = append(b, errObj...)
	} else {
		b = append(b, `,"result":`...)
		b = append(b, result...)
	}
	b = append(b, '}')
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	_, _ = w.Write(b)
}
