// What the e2e client scripts share: each reports what it saw as one JSON
// line on stdout (the Go test parses it) and exits with a code, and a
// deadline ends a run that hangs with code 3, so a stuck client never
// stalls the suite.

export const errInfo = (e) => ({ code: e?.code, message: String(e?.message ?? e) });
export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// harness returns finish(code), which runs the cleanups (awaited, errors
// ignored), writes out and exits, and the deadline timer that calls
// finish(3) after the given seconds (clear it once the run is done).
export function harness(out, seconds, cleanups = []) {
  const finish = async (code) => {
    for (const f of cleanups) {
      await f().catch(() => {});
    }
    process.stdout.write(JSON.stringify(out) + '\n');
    process.exit(code);
  };
  const deadline = setTimeout(() => {
    out.error = `timeout after ${seconds}s`;
    finish(3);
  }, seconds * 1000);
  return { finish, deadline };
}
