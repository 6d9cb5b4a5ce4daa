// The watchdog of one runner process (local/emulators/watchdog.ts starts it): plain JavaScript so
// it starts in milliseconds without tsx. Its stdin is a pipe from the runner; the kernel closes
// that pipe when the runner ends however it ends — `kill -9`, the OOM killer, a crash — and the
// watchdog then finishes what the runner could not:
//
//   {"watch": pid, "match": "redis-server"}   kill this process when the runner is gone
//   {"unwatch": pid}                          it exited (or was stopped) normally
//   {"write": path, "text": "...", "owner": "..."}   replace the file with text, if it still contains owner
//   {"remove": path, "owner": "..."}                 delete the file, if it still contains owner
//
// A watched pid is killed only while /proc/<pid>/cmdline still names `match` (where /proc exists):
// a pid reused by an unrelated process is left alone. Files are only touched while they still
// carry the dead runner's mark (`owner`), so a runner started since then keeps its own.
import { existsSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';

const watched = new Map();
const files = new Map();
let buffered = '';

function apply(line) {
  let m;
  try {
    m = JSON.parse(line);
  } catch {
    return;
  }
  if (typeof m.watch === 'number') watched.set(m.watch, String(m.match ?? ''));
  else if (typeof m.unwatch === 'number') watched.delete(m.unwatch);
  else if (typeof m.write === 'string' || typeof m.remove === 'string') files.set(m.write ?? m.remove, m);
}

function stillOurs(pid, match) {
  if (!existsSync('/proc')) return true;
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').replaceAll('\0', ' ').includes(match);
  } catch {
    return false; // already gone
  }
}

function alive(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

let finished = false;
function runnerGone() {
  if (finished) return;
  finished = true;
  if (buffered.trim()) apply(buffered);
  const targets = [...watched].filter(([pid, match]) => stillOurs(pid, match)).map(([pid]) => pid);
  // SIGTERM first: redis-server then writes its append-only file; whatever is left after 2 s is
  // killed. Well inside the 5 s a developer waits before starting again.
  for (const pid of targets) {
    try {
      process.kill(pid, 'SIGCONT');
      process.kill(pid, 'SIGTERM');
    } catch {}
  }
  for (const action of files.values()) {
    const path = action.write ?? action.remove;
    try {
      if (!readFileSync(path, 'utf8').includes(action.owner)) continue;
      if (action.write !== undefined) {
        writeFileSync(`${path}.tmp`, action.text);
        renameSync(`${path}.tmp`, path);
      } else rmSync(path, { force: true });
    } catch {}
  }
  const deadline = Date.now() + 2_000;
  const check = setInterval(() => {
    const left = targets.filter(alive);
    if (left.length === 0 || Date.now() > deadline) {
      for (const pid of left) {
        try {
          process.kill(pid, 'SIGKILL');
        } catch {}
      }
      clearInterval(check);
      process.exit(0);
    }
  }, 50);
}

process.stdin.setEncoding('utf8');
process.stdin.on('data', (chunk) => {
  buffered += chunk;
  const lines = buffered.split('\n');
  buffered = lines.pop() ?? '';
  for (const line of lines) apply(line);
});
process.stdin.on('end', runnerGone);
process.stdin.on('close', runnerGone);
process.stdin.on('error', runnerGone);
// The runner's own signals (a Ctrl-C to the terminal's process group) are not the watchdog's end:
// it ends when the runner does.
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP']) process.on(signal, () => {});
