package taskstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/redis/go-redis/v9"
)

// Sentinel errors. Every error a Store method returns wraps one of these (or
// a context error), with the operation and task id as context:
// "taskstore: complete 6f1c…: taskstore: task is terminal (completed)".
var (
	// ErrNotFound: no such task for this owner. A task of another owner is
	// reported exactly like a missing one (docs/ARCHITECTURE.md invariant 3).
	ErrNotFound = errors.New("taskstore: task not found")
	// ErrExpired: the task existed but its ttl has elapsed. Told apart from
	// ErrNotFound for Options.ExpiredWindow after expiry, then ErrNotFound.
	ErrExpired = errors.New("taskstore: task expired")
	// ErrTerminal: the task is completed, failed or cancelled and cannot change.
	ErrTerminal = errors.New("taskstore: task is terminal")
	// ErrInvalidTransition: the state machine does not allow this move
	// (including a self-transition).
	ErrInvalidTransition = errors.New("taskstore: invalid status transition")
	// ErrTooMany: the owner already has Options.MaxTasksPerOwner non-terminal tasks.
	ErrTooMany = errors.New("taskstore: too many active tasks for owner")
	// ErrTooManyAnonymous: the anonymous tasks not yet expired are at the
	// global cap (ReserveAnonymous).
	ErrTooManyAnonymous = errors.New("taskstore: too many anonymous tasks")
	// ErrTooManyFromAddress: the anonymous tasks of one client address are
	// at their cap (ReserveAnonymous).
	ErrTooManyFromAddress = errors.New("taskstore: too many anonymous tasks from this address")
	// ErrBadCursor: a List cursor this store did not produce.
	ErrBadCursor = errors.New("taskstore: bad cursor")
	// ErrUnavailable: Redis cannot be reached or cannot serve now (down,
	// loading, failing over). Retrying later may succeed.
	ErrUnavailable = errors.New("taskstore: redis unavailable")
	// ErrKeyReused: AddInputRequests was given a key already issued for the
	// task; keys are unique for a task's lifetime (SEP-2663 "Input Requests").
	ErrKeyReused = errors.New("taskstore: input request key already used")
	// ErrAttemptsExhausted: BeginAttempt found the task's attempts used up.
	ErrAttemptsExhausted = errors.New("taskstore: no attempt left")
	// ErrLeaseHeld: Claim found a live lease of another holder.
	ErrLeaseHeld = errors.New("taskstore: lease held by another replica")
	// ErrLeaseLost: Extend or Release by a holder that no longer holds the lease.
	ErrLeaseLost = errors.New("taskstore: lease lost")
	// ErrResultTooLarge: Complete or Fail was given more than
	// Options.MaxResultBytes; the task was failed with an explanatory error.
	ErrResultTooLarge = errors.New("taskstore: result too large")
)

// Script return codes: the first element of every script's reply.
const (
	codeOK        = 0
	codeNotFound  = 1
	codeExpired   = 2
	codeTerminal  = 3
	codeInvalid   = 4
	codeTooMany   = 5
	codeExists    = 6
	codeLeaseHeld = 7
	codeLeaseLost = 8
	codeKeyReused = 9
	codeExhausted = 10 // BeginAttempt: no attempt left (rerun.go)
)

// codeErr is the one place a script's code becomes a sentinel. detail is the
// reply's second element (current status, holder, offending key), if any.
func codeErr(code int64, detail string) error {
	var err error
	switch code {
	case codeOK:
		return nil
	case codeNotFound:
		return ErrNotFound
	case codeExpired:
		return ErrExpired
	case codeTerminal:
		err = ErrTerminal
	case codeInvalid:
		err = ErrInvalidTransition
	case codeTooMany:
		return ErrTooMany
	case codeLeaseHeld:
		err = ErrLeaseHeld
	case codeLeaseLost:
		return ErrLeaseLost
	case codeKeyReused:
		err = ErrKeyReused
	default:
		return fmt.Errorf("taskstore: unexpected script code %d", code)
	}
	if detail != "" {
		return fmt.Errorf("%w (%s)", err, detail)
	}
	return err
}

// classify maps a go-redis error to ErrUnavailable when it means Redis cannot
// serve now, and keeps the caller's own context errors as they are.
func classify(ctx context.Context, err error) error {
	if err == nil || errors.Is(err, redis.Nil) {
		return err
	}
	if ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		return ctx.Err()
	}
	if unavailable(err) {
		return fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	return err
}

func unavailable(err error) bool {
	var ne net.Error
	var oe *net.OpError
	switch {
	case errors.Is(err, redis.ErrClosed),
		errors.Is(err, redis.ErrPoolTimeout),
		errors.Is(err, io.EOF),
		errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, net.ErrClosed),
		errors.Is(err, syscall.ECONNREFUSED),
		errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, syscall.EPIPE),
		errors.Is(err, context.DeadlineExceeded), // dial or read timeout inside go-redis
		errors.As(err, &oe),
		errors.As(err, &ne):
		return true
	}
	// Server replies that mean "not now" (redis.Error has no codes).
	msg := err.Error()
	for _, p := range []string{"LOADING", "MASTERDOWN", "CLUSTERDOWN", "TRYAGAIN", "READONLY", "BUSY ", "NOREPLICAS", "ERR max number of clients"} {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return strings.Contains(msg, "connection refused") || strings.Contains(msg, "i/o timeout")
}
