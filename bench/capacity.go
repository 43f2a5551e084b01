package main

// -mode capacity: what each operation of a task's life costs in Redis
// commands and in gateway CPU, what a task costs in Redis memory and in
// gateway memory, and, computed from those figures, what 1,000,000
// concurrent tasks and 50,000 polls/s would need (docs/CAPACITY.md). Four
// phases, each on its own processes over 127.0.0.1:
//
//	A  2026-07-28 (stateless upstream), one replica, one redis-server, no
//	   renewal, sweep or latency sync: create alone (a held task),
//	   create+finish (an echo task), polls of a working and of a completed
//	   task, an input round (the elicit tool), Redis bytes per completed
//	   task.
//	H  held tasks (slow tool, outliving the phase), one replica with a
//	   short --lease-renew: the idle replica, then lease renewals and
//	   sweeps per held task, Redis bytes and taskgate RSS per held task.
//	B  2025-11-25 (stateful upstream, one session): create+finish and the
//	   two polls.
//	C  a 3-master Redis Cluster and 3 replicas: create, poll, finish of
//	   held tasks round robin over the replicas, commands and bytes per
//	   task summed over the masters and per master, against A and H.
//
// Redis commands are counted with the slow log at 0 µs (redis_count.go)
// while the operations are sent one at a time; CPU (the run time of the
// processes' threads, checked against utime+stime) over separate batches
// at -concurrency with the slow log off, since logging every command
// costs Redis CPU of its own. Round trips are what taskgate itself counted
// (taskgate_store_command_duration_seconds: a pipeline is one). The
// projection (project) uses only these figures, taskgate's defaults as
// its serve --help prints them, and the plan* constants below.
//
// The mode's parts, one file each: capacity_env.go (one phase's processes
// and the requests they are sent), capacity_watch.go (waiting on
// taskgate's metrics and on a task's status in Redis), capacity_count.go
// (Redis commands per batch), capacity_cpu.go and capacity_proc.go (CPU
// per batch, what /proc says), capacity_memory.go (Redis memory and the
// key census), capacity_cluster.go, capacity_defaults.go, the phases
// (capacity_a.go, capacity_h.go, capacity_b.go, capacity_c.go), the rows
// (capacity_rows.go), the projection (capacity_project.go) and the report
// (capacity_report*.go).

import (
	"errors"
	"fmt"
	"time"
)

// Planning assumptions of the projection. These are inputs an operator
// chooses (or must find out about their own clients and hardware), not
// measurements; everything else the projection uses is measured in the run.
const (
	planTasks        = 1_000_000        // concurrent non-terminal tasks
	planPolls        = 50_000           // tasks/get per second, all clients together
	planLifetime     = 60 * time.Second // mean time from create to terminal: sets the creation rate
	planInputRounds  = 0.5              // mean input rounds (input_required → answer) per task
	planShortTTL     = 5 * time.Minute  // second scenario: --default-ttl and --max-ttl both this
	planShardMem     = 25 << 30         // used_memory one Redis shard may hold
	planShardOps     = 100_000          // commands per second one Redis shard may serve
	planShardCPU     = 0.5              // share of a shard's one main thread the load may take
	planMemHeadroom  = 1.3              // used_memory × this: fragmentation, replication and client buffers
	planReplicaCores = 4.0              // cores per gateway replica
	planReplicaUtil  = 0.6              // target CPU utilisation of a replica
	planReplicaMem   = 8 << 30          // memory per gateway replica
)

// Sizes of the measurement itself.
const (
	capHeldDefault   = 2000                    // held tasks in phase H unless -held is given
	capTasksPerOwner = 10                      // tasks per Authorization in the memory and cluster batches
	capCPUBatch      = 1500 * time.Millisecond // each timed CPU batch
	capCPURounds     = 3                       // phase A's CPU batches: rounds (the median is reported)
	capWindow        = 3 * time.Second         // the idle and renewal windows
	capHeldLease     = 3 * time.Second         // phase H: --lease
	capHeldRenew     = time.Second             // phase H: --lease-renew and --latency-sync
	capHoldSecs      = 600                     // phase H's held tasks: outlive the phase (taskgate is killed at its end)
	capClusterNodes  = 3                       // masters
	capClusterTasks  = 3000                    // tasks in the cluster check (and in phase A's memory batch)
	capClusterHold   = 30                      // seconds the cluster check's tasks run: polled working, then finish
	capClusterRenew  = 5 * time.Minute         // phase C: no renewal or sweep during the check (measured in H)
	capClusterLease  = 10 * time.Minute        // phase C: --lease
	capPollConc      = 8                       // CPU batch of input rounds: concurrent flows
	capSettle        = 150 * time.Millisecond
	capBigText       = 4096 // the echo text of the larger-result batch
	capBigTasks      = 1000
)

// capacityBench runs the phases in turn, each on processes of its own, and
// emits the report.
func capacityBench(o options) error {
	if o.countReqs < 1 || o.tasks < 1 || o.concurrency < 1 {
		return errors.New("-count-requests, -tasks and -concurrency must be positive")
	}
	if o.set["held"] && o.held < 1 {
		return errors.New("-held must be positive")
	}
	if _, err := raiseNofile(); err != nil {
		return fmt.Errorf("raising RLIMIT_NOFILE: %w", err)
	}
	run, err := startModeRun()
	if err != nil {
		return err
	}
	defer run.close()
	ctx := run.ctx
	defs, err := readDefaults(run.tg)
	if err != nil {
		return err
	}
	loads := []string{"start " + run.load0}
	a, err := phaseA(ctx, o, run.tg, run.tu, run.dir)
	if err != nil {
		return fmt.Errorf("phase A (2026-07-28 operations): %w", err)
	}
	loads = append(loads, "after A "+loadAvg())
	h, err := phaseH(ctx, o, defs, run.tg, run.tu, run.dir)
	if err != nil {
		return fmt.Errorf("phase H (held tasks): %w", err)
	}
	loads = append(loads, "after H "+loadAvg())
	b, err := phaseB(ctx, o, run.tg, run.tu, run.dir)
	if err != nil {
		return fmt.Errorf("phase B (2025-11-25 operations): %w", err)
	}
	loads = append(loads, "after B "+loadAvg())
	c, err := phaseC(ctx, o, run.tg, run.tu, run.dir)
	if err != nil {
		return fmt.Errorf("phase C (cluster): %w", err)
	}
	loads = append(loads, "at end "+loadAvg())
	return emit(capacityReport(o, defs, a, h, b, c, loads, time.Since(run.t0)))
}
