package bridgesession

import "time"

// Reap calls sweep every idle/4 (10 ms to a minute) until stop closes;
// sweep ends the sessions idle for longer than idle.
func Reap(stop <-chan struct{}, idle time.Duration, sweep func(now time.Time)) {
	every := min(max(idle/4, 10*time.Millisecond), time.Minute)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case now := <-t.C:
			sweep(now)
		}
	}
}
