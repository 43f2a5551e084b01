package taskstore

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
	"github.com/rs/zerolog"
)

// clockTick is how often the embedded Redis' clock catches up with real
// time, and so the resolution of key expiry there.
const clockTick = 100 * time.Millisecond

// Embedded is an in-process Redis (miniredis) on a loopback port, for
// running taskgate without --redis-url. The Store code is the same as with a
// real Redis. State is in memory: lost on exit and not shared between
// processes. The port asks for a password, random per process and never
// logged, so another local user cannot read or rewrite tasks through it.
type Embedded struct {
	srv    *miniredis.Miniredis
	client redis.UniversalClient
	stop   chan struct{}
	done   chan struct{}
	once   sync.Once
}

// OpenEmbedded starts the in-process Redis and its clock, returns a handle
// with a client on it, and logs (once) that state is not durable.
func OpenEmbedded(log zerolog.Logger) (*Embedded, error) {
	password, err := randomPassword()
	if err != nil {
		return nil, fmt.Errorf("taskstore: start embedded redis: %w", err)
	}
	srv := miniredis.NewMiniRedis()
	srv.RequireAuth(password)
	if err := srv.StartAddr("127.0.0.1:0"); err != nil {
		return nil, fmt.Errorf("taskstore: start embedded redis: %w", err)
	}
	srv.SetTime(time.Now())
	e := &Embedded{
		srv: srv,
		client: redis.NewUniversalClient(&redis.UniversalOptions{
			Addrs:    []string{srv.Addr()},
			Password: password,
			// miniredis refuses CLIENT SETINFO and MAINT_NOTIFICATIONS (see
			// withClientDefaults).
			DisableIdentity:          true,
			MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
			DialTimeout:              DefaultDialTimeout,
			ReadTimeout:              DefaultReadTimeout,
			WriteTimeout:             DefaultWriteTimeout,
			PoolTimeout:              DefaultPoolTimeout,
			MaxRetries:               DefaultMaxRetries,
			DialerRetries:            DefaultDialerRetries,
		}),
		stop: make(chan struct{}),
		done: make(chan struct{}),
	}
	go e.runClock()
	log.Warn().
		Msg("no --redis-url: task state is kept in memory in this process; it is lost on exit and not shared with other replicas")
	return e, nil
}

// randomPassword is 32 random hex digits.
func randomPassword() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return hex.EncodeToString(b[:]), nil
}

// runClock moves miniredis' clock with real time. miniredis never expires
// keys on its own: FastForward does, and SetTime sets what TIME and
// EXPIREAT see.
func (e *Embedded) runClock() {
	defer close(e.done)
	t := time.NewTicker(clockTick)
	defer t.Stop()
	last := time.Now()
	for {
		select {
		case <-e.stop:
			return
		case now := <-t.C:
			e.srv.SetTime(now)
			e.srv.FastForward(now.Sub(last))
			last = now
		}
	}
}

// Client returns the client connected to the embedded Redis. Close closes it.
func (e *Embedded) Client() redis.UniversalClient { return e.client }

// Addr is the embedded Redis' loopback address.
func (e *Embedded) Addr() string { return e.srv.Addr() }

// Close stops the clock, closes the client and the server. Close the Store
// first. It may be called more than once.
func (e *Embedded) Close() error {
	var err error
	e.once.Do(func() {
		close(e.stop)
		<-e.done
		err = e.client.Close()
		e.srv.Close()
	})
	return err
}
