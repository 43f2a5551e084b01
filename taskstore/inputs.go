package taskstore

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
)

// Input requests are the upstream's server-to-client requests (elicitation,
// sampling, roots) held by a task. Whichever flavour the client speaks, they
// are one map: key -> {method, params}, keys unique for the task's lifetime
// (SEP-2663 "Input Requests"). Their lifecycle, all inside the task hash:
//
//	AddInputRequests    in:<key> + used:<key>        (task -> input_required)
//	AnswerInputs        in:<key> -> re:<key>         (last one -> working)
//	TakeInputResponses  re:<key> deleted, returned   (used:<key> stays)

// AddInputRequests records new outstanding input requests and moves the task
// to input_required with the given status message. All keys must be new for
// the task's lifetime, else ErrKeyReused and nothing is written. A terminal
// task: ErrTerminal.
//
// writeID, when not empty, makes the call safe to retry after
// ErrUnavailable: Redis may have run a write whose reply was lost (it died
// before answering), and a retry with the same writeID and keys then
// returns nil and changes nothing. Use one writeID per set of requests
// (e.g. a fresh UUID), the same for its retries.
func (s *Store) AddInputRequests(ctx context.Context, owner, id string, reqs map[string]InputRequest, message, writeID string) error {
	err := s.addInputRequests(ctx, owner, id, reqs, message, writeID)
	if err != nil {
		return fmt.Errorf("taskstore: add input requests %s: %w", id, err)
	}
	return nil
}

func (s *Store) addInputRequests(ctx context.Context, owner, id string, reqs map[string]InputRequest, message, writeID string) error {
	if !validID(id) {
		return ErrNotFound
	}
	if len(reqs) == 0 {
		return fmt.Errorf("no input requests")
	}
	keys := sortedKeys(reqs)
	args := []interface{}{owner, s.nowMS(), s.k.channel(owner, id), message, writeID, s.whArg(), s.inputMessageArg(reqs[keys[0]])}
	for _, key := range keys {
		if key == "" {
			return fmt.Errorf("empty input request key")
		}
		b, err := json.Marshal(reqs[key])
		if err != nil {
			return fmt.Errorf("input request %q: %w", key, err)
		}
		args = append(args, key, reqs[key].Method, b, reqs[key].Digest)
	}
	vals, err := s.runWith(ctx, addInputsCmd, s.withRecords([]string{s.k.task(owner, id), s.k.outbox(owner)}, owner, id, false),
		args, s.whHint(ctx, owner))
	if err != nil {
		return err
	}
	return s.replyErr(ctx, owner, id, vals)
}

// AnswerInputs durably records responses to the task's outstanding input
// requests and signals the worker. Responses to keys that are not
// outstanding (unknown, or already answered) are ignored; a partial set is
// fine, and the task stays input_required until the last one arrives, then
// goes back to working (SEP-2663 tasks/update). It returns how many
// responses were accepted. A terminal task: ErrTerminal.
func (s *Store) AnswerInputs(ctx context.Context, owner, id string, responses map[string]json.RawMessage) (int, error) {
	n, err := s.answerInputs(ctx, owner, id, responses)
	if err != nil {
		return 0, fmt.Errorf("taskstore: answer inputs %s: %w", id, err)
	}
	return n, nil
}

func (s *Store) answerInputs(ctx context.Context, owner, id string, responses map[string]json.RawMessage) (int, error) {
	if !validID(id) {
		return 0, ErrNotFound
	}
	args := []interface{}{owner, s.nowMS(), s.k.channel(owner, id)}
	for _, key := range sortedKeys(responses) {
		args = append(args, key, string(responses[key]))
	}
	vals, err := s.run(ctx, answerInputsCmd, s.withRecords([]string{s.k.task(owner, id)}, owner, id, false), args...)
	if err != nil {
		return 0, err
	}
	if err := s.replyErr(ctx, owner, id, vals); err != nil {
		return 0, err
	}
	n, _ := vals[1].(int64)
	return int(n), nil
}

// TakeInputResponses returns the responses recorded since the last call and
// removes them, so each is handed to the worker once. Their keys stay used.
// It also returns the task's status, so the worker learns of a cancel in the
// same round trip. Works on terminal tasks too.
//
// takeID, when not empty, makes a take safe to repeat after
// ErrUnavailable: Redis may have run it (the responses are gone from the
// record) and died before answering. A take with the same takeID returns
// those responses again, with any recorded since. Use a fresh takeID once
// a take succeeded, the same one until it does.
func (s *Store) TakeInputResponses(ctx context.Context, owner, id, takeID string) (map[string]json.RawMessage, Status, error) {
	resp, st, err := s.takeInputResponses(ctx, owner, id, takeID)
	if err != nil {
		return nil, "", fmt.Errorf("taskstore: take input responses %s: %w", id, err)
	}
	return resp, st, nil
}

func (s *Store) takeInputResponses(ctx context.Context, owner, id, takeID string) (map[string]json.RawMessage, Status, error) {
	if !validID(id) {
		return nil, "", ErrNotFound
	}
	vals, err := s.run(ctx, takeResponsesCmd, []string{s.k.task(owner, id)}, owner, s.nowMS(), takeID)
	if err != nil {
		return nil, "", err
	}
	if err := s.replyErr(ctx, owner, id, vals); err != nil {
		return nil, "", err
	}
	st := Status(detail(vals))
	var out map[string]json.RawMessage
	for k, v := range decodePairs(vals[2:]) {
		if out == nil {
			out = make(map[string]json.RawMessage)
		}
		out[k] = json.RawMessage(v)
	}
	return out, st, nil
}

// sortedKeys gives scripts a deterministic argument order (useful in tests
// and in MONITOR output).
func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
