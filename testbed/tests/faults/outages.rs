//! The outages the fault tests cause on the shared test bed, each one undone by a guard when it is
//! dropped, so that a test that fails midway never leaves the next test without a broker or with a
//! mount: the main broker stopped (`testbed/tb stop-kafka`, docs/testbed.md), the API server
//! restarted (`testbed/tb restart-apiserver`), etcd restarted (`testbed/tb restart-etcd`), a process
//! frozen (SIGSTOP), and a small disk of its own that a test fills up.

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use flow_testbed::*;

/// `testbed/tb <verb>` on the test bed's run directory (the one `testbed/tb env` named), with its
/// output.
fn tb(verb: &str) -> Output {
    tb_args(&[verb])
}

/// [`tb`], which must succeed; how long it took.
fn tb_ok(verb: &str) -> Duration {
    let t = Instant::now();
    let o = tb(verb);
    assert!(o.status.success(), "testbed/tb {verb}: {}", show(&o));
    t.elapsed()
}

/// The main broker, stopped; started again by [`BrokerStopped::start`] or, should the test fail
/// before it, when dropped: every other test needs the broker.
pub struct BrokerStopped {
    started: bool,
}

impl BrokerStopped {
    /// Stops the broker (SIGTERM; the test bed's stop timeout, then SIGKILL) and returns once the
    /// process is gone, with how long that took.
    pub fn stop() -> (BrokerStopped, Duration) {
        let guard = BrokerStopped { started: false };
        let took = tb_ok("stop-kafka");
        (guard, took)
    }

    /// Starts the broker on its data and returns once every listener answers, with how long that took.
    pub fn start(mut self) -> Duration {
        self.started = true;
        tb_ok("start-kafka")
    }
}

impl Drop for BrokerStopped {
    fn drop(&mut self) {
        if !self.started {
            let o = tb("start-kafka");
            if !o.status.success() {
                eprintln!("faults: could not start the broker again; run `testbed/tb up kafka`: {}", show(&o));
            }
        }
    }
}

/// Restarts the API server for real (SIGTERM, start, `/readyz`), as during an upgrade of the control
/// plane; returns how long it was away. A failed restart is tried once more before the test fails,
/// so that the test bed keeps an API server.
pub fn restart_apiserver() -> Duration {
    let t = Instant::now();
    let o = tb("restart-apiserver");
    if !o.status.success() {
        eprintln!("faults: restarting the API server failed; trying once more: {}", show(&o));
        tb_ok("restart-apiserver");
    }
    t.elapsed()
}

/// A small disk of its own for one test: an ext2 file system with 1 KiB blocks in an image file,
/// loop-mounted at `target/e2e-disks/<name>-<pid>`; unmounted and removed when dropped.
///
/// A full disk refuses only the writes that need a new block, and the ledger (sled) appends to its
/// log: on a tmpfs's 4 KiB pages a small reset's writes all land in the page its first ones took,
/// and never fail. With 1 KiB blocks, and no blocks reserved for root, the writes of a few groups
/// need a new block.
pub struct Disk {
    /// The mount point.
    pub dir: PathBuf,
    image: PathBuf,
}

impl Disk {
    /// Makes and mounts a disk of `kib` KiB.
    pub fn mount(name: &str, kib: u32) -> Disk {
        let base = bed().root.join("target/e2e-disks");
        let dir = base.join(format!("{name}-{}", std::process::id()));
        let image = base.join(format!("{name}-{}.img", std::process::id()));
        unmount(&dir);
        std::fs::create_dir_all(&dir).expect("mount point");
        let disk = Disk { dir, image };
        let file = std::fs::File::create(&disk.image).expect("disk image");
        file.set_len(u64::from(kib) * 1024).expect("disk image size");
        let run = |cmd: &mut Command| {
            let o = cmd.output().expect("runs");
            assert!(o.status.success(), "{cmd:?} (the fault tests run as root): {}", show(&o));
        };
        run(Command::new("mkfs.ext2").args(["-q", "-F", "-b", "1024", "-m", "0"]).arg(&disk.image));
        run(Command::new("mount").args(["-o", "loop"]).arg(&disk.image).arg(&disk.dir));
        disk
    }

    /// Writes zeros into a file of its own until the file system is full.
    pub fn fill(&self) {
        use std::io::Write;
        let mut f = std::fs::File::create(self.dir.join("fill")).expect("fill file");
        let chunk = vec![0u8; 64 * 1024];
        while f.write_all(&chunk).and_then(|()| f.flush()).is_ok() {}
        // The last blocks, a little at a time.
        while f.write_all(&[0u8; 512]).and_then(|()| f.flush()).is_ok() {}
        let _ = f.sync_all();
    }

    /// Frees what [`Disk::fill`] took.
    pub fn free(&self) {
        std::fs::remove_file(self.dir.join("fill")).expect("free the disk");
    }
}

/// Unmounts `dir` if something is mounted there (lazily: an operator still holding files in it
/// does not keep the mount; the loop device goes with the last file closed).
fn unmount(dir: &std::path::Path) {
    let _ = Command::new("umount").arg("-l").arg(dir).stderr(Stdio::null()).status();
}

impl Drop for Disk {
    fn drop(&mut self) {
        unmount(&self.dir);
        let _ = std::fs::remove_dir(&self.dir);
        let _ = std::fs::remove_file(&self.image);
    }
}

/// The pid of test bed part `part` (its pid file in the run directory).
fn part_pid(part: &str) -> u32 {
    let run = std::env::var_os("FLOW_TESTBED_RUN").map_or_else(|| bed().root.join("target/testbed"), PathBuf::from);
    let f = run.join("pids").join(format!("{part}.pid"));
    let text = std::fs::read_to_string(&f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
    text.trim().parse().unwrap_or_else(|e| panic!("{}: {e}", f.display()))
}

/// Sends `signal` (`-STOP`, `-CONT`, `-KILL`) to process `pid`.
pub fn signal(pid: u32, signal: &str) {
    let ok = Command::new("kill").args([signal, &pid.to_string()]).status().is_ok_and(|s| s.success());
    assert!(ok, "kill {signal} {pid}");
}

/// A test bed process frozen with SIGSTOP, as a broker or an API server that hangs (a long garbage
/// collection, a paused VM): its sockets stay open and the kernel keeps accepting what is sent to
/// them, but nothing is read or answered. Continued (SIGCONT) by [`Frozen::thaw`] or, should the test
/// fail first, when dropped: every other test needs the process.
pub struct Frozen {
    pid: u32,
    part: String,
    since: Instant,
    thawed: bool,
}

impl Frozen {
    /// Freezes test bed part `part` (`kafka`, `kube-apiserver`, `kafka-pair-2`, ...).
    pub fn part(part: &str) -> Frozen {
        let pid = part_pid(part);
        signal(pid, "-STOP");
        Frozen { pid, part: part.to_string(), since: Instant::now(), thawed: false }
    }

    /// Continues the process; returns how long it was frozen.
    pub fn thaw(mut self) -> Duration {
        self.thawed = true;
        signal(self.pid, "-CONT");
        self.since.elapsed()
    }
}

impl Drop for Frozen {
    fn drop(&mut self) {
        if !self.thawed {
            let ok = Command::new("kill").args(["-CONT", &self.pid.to_string()]).status().is_ok_and(|s| s.success());
            if !ok {
                eprintln!("faults: could not continue {} (pid {}); kill -CONT it by hand", self.part, self.pid);
            }
        }
    }
}

/// Restarts etcd (SIGTERM, start on its data, `/health`) under the running API server; returns how
/// long it took. A failed restart is tried once more before the test fails, so that the test bed
/// keeps an etcd.
pub fn restart_etcd() -> Duration {
    let t = Instant::now();
    let o = tb("restart-etcd");
    if !o.status.success() {
        eprintln!("faults: restarting etcd failed; trying once more: {}", show(&o));
        tb_ok("restart-etcd");
    }
    t.elapsed()
}

/// `testbed/tb <args>` on the test bed's run directory, with its output.
fn tb_args(args: &[&str]) -> Output {
    let mut cmd = Command::new(bed().root.join("testbed/tb"));
    cmd.args(args).stdin(Stdio::null());
    if let Some(run) = std::env::var_os("FLOW_TESTBED_RUN") {
        cmd.env("TESTBED_RUN", run);
    }
    cmd.output().expect("testbed/tb runs")
}

/// Broker `node` of the broker pair, stopped (`testbed/tb stop-pair`); started again by
/// [`PairBrokerStopped::start`] or, should the test fail before it, when dropped.
pub struct PairBrokerStopped {
    node: u8,
    started: bool,
}

impl PairBrokerStopped {
    /// Stops broker `node` of the pair (SIGTERM: a controlled shutdown, which hands its leaderships
    /// over) and returns once the process is gone, with how long that took.
    pub fn stop(node: u8) -> (PairBrokerStopped, Duration) {
        let guard = PairBrokerStopped { node, started: false };
        let t = Instant::now();
        let o = tb_args(&["stop-pair", &node.to_string()]);
        assert!(o.status.success(), "testbed/tb stop-pair {node}: {}", show(&o));
        (guard, t.elapsed())
    }

    /// Starts it again on its data and returns once both brokers of the pair answer, with how long
    /// that took.
    pub fn start(mut self) -> Duration {
        self.started = true;
        let t = Instant::now();
        let o = tb_args(&["start-pair", &self.node.to_string()]);
        assert!(o.status.success(), "testbed/tb start-pair {}: {}", self.node, show(&o));
        t.elapsed()
    }
}

impl Drop for PairBrokerStopped {
    fn drop(&mut self) {
        if !self.started {
            let o = tb_args(&["start-pair", &self.node.to_string()]);
            if !o.status.success() {
                eprintln!(
                    "faults: could not start broker {} of the pair again; run `testbed/tb up kafka-pair`: {}",
                    self.node,
                    show(&o)
                );
            }
        }
    }
}
