//! The seccomp program generator: rules in, one classic-BPF program out, in plain Rust
//! (microseconds): the architecture check first (a foreign architecture or an x32 call
//! kills the process), then a binary tree over runs of system call numbers that share a
//! decision, then each call's argument checks. The program is built before `fork` and
//! exported as plain `sock_filter`s; a forked child only installs it ([`install`]: one
//! `seccomp(2)` call, no allocation).
//!
//! Why not stacked linear filters: the kernel runs every installed filter on every
//! system call and JIT-compiles each at install time; four linear filters of ~250
//! comparisons cost ~1 ms per child and hundreds of instructions per call.
//!
//! Why runs and not one leaf per number (libseccomp's layout, and this generator's until
//! issue #26): half the instructions (the default profile: 231 against 573), and the
//! kernel converts, checks and JIT-compiles every instruction at each child's install.
//!
//! Why not libseccomp any more: it generated a tree of numbers, but took ~4 ms of CPU per
//! program (two per profile), paid on every `rsandbox exec` (issue #26), after probing
//! the kernel's seccomp features with ten system calls. What it was trusted for (the
//! answers, the 64-bit argument comparisons) is now checked against it: the tests
//! build every profile with both generators and run both programs in the interpreter
//! below on every number 0..=1023 with ~100 argument vectors each, besides comparing
//! each with the table itself; libseccomp stays a dev-dependency for that
//! ([`reference`], test builds only).
//!
//! Tested without a kernel by the interpreter below (every number 0..=1023, both
//! profiles, the argument rules, arguments with garbage in the upper half), and against
//! the kernel in `tests/layers.rs`.

/// One classic-BPF instruction, laid out as the kernel's `struct sock_filter`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Insn {
    code: u16,
    jt: u8,
    jf: u8,
    k: u32,
}

/// `program` with every `return from` made `return to`: the same program for another
/// violation action, when `from` is a value only violations return (a program is built
/// the same way whatever its violation value; only its returns differ).
pub fn with_violation_action(program: &[Insn], from: u32, to: u32) -> Vec<Insn> {
    program.iter().map(|i| if i.code == RET_K && i.k == from { Insn { k: to, ..*i } } else { *i }).collect()
}

/// `SECCOMP_RET_ALLOW`.
pub const RET_ALLOW: u32 = 0x7fff_0000;
/// `SECCOMP_RET_KILL_PROCESS`: for a foreign architecture or an x32 call.
pub const RET_KILL_PROCESS: u32 = 0x8000_0000;
/// `SECCOMP_RET_TRAP`: SIGSYS.
pub const RET_TRAP: u32 = 0x0003_0000;
/// `SECCOMP_RET_USER_NOTIF`: the listener's holder decides.
pub const RET_USER_NOTIF: u32 = 0x7fc0_0000;
/// `SECCOMP_RET_ERRNO` with this errno.
pub const fn ret_errno(errno: i32) -> u32 {
    0x0005_0000 | (errno as u32 & 0xffff)
}

/// The only architecture the program lets through (`AUDIT_ARCH_X86_64`).
#[cfg(target_arch = "x86_64")]
pub const AUDIT_ARCH: u32 = 0xc000_003e;
/// The only architecture the program lets through (`AUDIT_ARCH_AARCH64`).
#[cfg(target_arch = "aarch64")]
pub const AUDIT_ARCH: u32 = 0xc000_00b7;
/// x32 system calls share the x86_64 audit arch with this bit set: never allowed.
#[cfg(all(test, target_arch = "x86_64"))]
const X32_SYSCALL_BIT: u32 = 0x4000_0000;

/// What a system call gets.
#[derive(Clone, Debug, PartialEq, Eq)]
#[allow(missing_docs)] // the fields are named by the variants' documentation
pub enum Decision {
    /// Return this value (allow, an errno, the violation action).
    Return(u32),
    /// The violation action when `args[arg]`'s low 32 bits have any of `mask`'s bits,
    /// else allow (`clone` with namespace flags).
    ViolationIfAnyBit { arg: u32, mask: u32 },
    /// `args[arg]`'s low 32 bits decide: the case whose pattern matches gives the
    /// answer, else `otherwise` (`ioctl` requests, `prctl` options, socket options).
    /// Patterns must not overlap.
    Switch { arg: u32, cases: Vec<Case>, otherwise: Answer },
    /// `errno` when any of `args` is non-zero (all 64 bits), else allow (calls that may
    /// act on the caller only).
    ErrnoIfNonZero { args: Vec<u32>, errno: i32 },
    /// `errno` when `args[arg]`'s low 32 bits have any of `mask`'s bits, else allow.
    ErrnoIfAnyBit { arg: u32, mask: u32, errno: i32 },
    /// Allow when every check holds, else `errno` (`socket` of one family, type and
    /// protocol only). Only the low 32 bits count: the calls it is for take `int`s.
    AllowOnly { checks: Vec<ArgCheck>, errno: i32 },
}

/// One condition of a [`Decision::AllowOnly`]: `args[arg]`'s low 32 bits, masked, are
/// one of `values`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArgCheck {
    /// The argument.
    pub arg: u32,
    /// The bits that count (type flags such as `SOCK_CLOEXEC` masked out).
    pub mask: u32,
    /// The values allowed (already masked).
    pub values: Vec<u32>,
}

/// What a [`Decision::Switch`] case answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Answer {
    /// This `SECCOMP_RET_*` value.
    Return(u32),
    /// The profile's violation action.
    Violation,
}

/// One case of a [`Decision::Switch`]: the values whose high `bits` bits equal those of
/// `value` (32: the value itself; 24: a block of 256 such as the socket ioctls `0x89xx`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Case {
    /// The value (its low `32 - bits` bits are ignored).
    pub value: u32,
    /// How many high bits must match, 1..=32.
    pub bits: u32,
    /// The answer for a match.
    pub answer: Answer,
}

impl Case {
    /// Exactly `value`.
    pub const fn exact(value: u32, answer: Answer) -> Case {
        Case { value, bits: 32, answer }
    }

    /// The mask of the bits that count.
    fn mask(&self) -> u32 {
        u32::MAX.checked_shl(32 - self.bits).unwrap_or(0)
    }

    /// Whether `v` falls in this case.
    pub fn matches(&self, v: u32) -> bool {
        v & self.mask() == self.value & self.mask()
    }
}

// Classic BPF opcodes, as seccomp accepts them (<linux/bpf_common.h>).
const LD_W_ABS: u16 = 0x20; // BPF_LD (0) | BPF_W (0) | BPF_ABS
const ALU_AND_K: u16 = 0x04 | 0x50; // BPF_ALU | BPF_AND | BPF_K
const JMP_JA: u16 = 0x05; // BPF_JMP | BPF_JA
const JMP_JEQ_K: u16 = 0x05 | 0x10; // BPF_JMP | BPF_JEQ | BPF_K
const JMP_JGE_K: u16 = 0x05 | 0x30; // BPF_JMP | BPF_JGE | BPF_K
const JMP_JSET_K: u16 = 0x05 | 0x40; // BPF_JMP | BPF_JSET | BPF_K
const RET_K: u16 = 0x06; // BPF_RET | BPF_K
/// The kernel's limit on a program's length (`BPF_MAXINSNS`).
const MAX_INSNS: usize = 4096;
/// Offsets in `struct seccomp_data`: nr, arch, then args[6] (u64 each) from 16.
const NR_OFFSET: u32 = 0;
const ARCH_OFFSET: u32 = 4;

/// Where the low and high 32 bits of `args[arg]` are in `struct seccomp_data`.
fn arg_words(arg: u32) -> (u32, u32) {
    let base = 16 + 8 * arg;
    if cfg!(target_endian = "little") {
        (base, base + 4)
    } else {
        (base + 4, base)
    }
}

/// A position in the program, counted from its end: the program is written backwards,
/// so every jump goes to an instruction that is already written and its distance is
/// known when the jump is written.
type Label = usize;

/// The program, written from its last instruction to its first.
struct Backwards {
    reversed: Vec<Insn>,
}

impl Backwards {
    /// Write `insn` before everything written so far; its label.
    fn push(&mut self, insn: Insn) -> Label {
        self.reversed.push(insn);
        self.reversed.len()
    }

    /// Instructions between the next one written and `target`: its jump offset.
    fn distance(&self, target: Label) -> usize {
        self.reversed.len() - target
    }

    fn ret(&mut self, value: u32) -> Label {
        self.push(Insn { code: RET_K, jt: 0, jf: 0, k: value })
    }

    fn load(&mut self, offset: u32) -> Label {
        self.push(Insn { code: LD_W_ABS, jt: 0, jf: 0, k: offset })
    }

    fn and(&mut self, mask: u32) -> Label {
        self.push(Insn { code: ALU_AND_K, jt: 0, jf: 0, k: mask })
    }

    fn jump_always(&mut self, target: Label) -> Label {
        let k = u32::try_from(self.distance(target)).expect("a program of at most 4096 instructions");
        self.push(Insn { code: JMP_JA, jt: 0, jf: 0, k })
    }

    /// A conditional jump to `yes` or `no`. Its two offsets have 8 bits: a target
    /// further away is reached through an unconditional jump (32 bits) written
    /// right after it.
    fn jump(&mut self, code: u16, k: u32, mut yes: Label, mut no: Label) -> Label {
        loop {
            let (t, f) = (self.distance(yes), self.distance(no));
            match (u8::try_from(t), u8::try_from(f)) {
                (Ok(jt), Ok(jf)) => return self.push(Insn { code, jt, jf, k }),
                (Err(_), _) => yes = self.jump_always(yes),
                (_, Err(_)) => no = self.jump_always(no),
            }
        }
    }
}

/// The check of one decision, written before what is already written; the label of its
/// first instruction. Every path ends in a return: nothing falls through.
fn write_decision(p: &mut Backwards, decision: &Decision, violation: u32, rets: &mut Rets) -> Label {
    match decision {
        Decision::Return(value) => rets.get(p, *value),
        Decision::ViolationIfAnyBit { arg, mask } => {
            let (yes, no) = (rets.get(p, violation), rets.get(p, RET_ALLOW));
            p.jump(JMP_JSET_K, *mask, yes, no);
            p.load(arg_words(*arg).0)
        }
        Decision::ErrnoIfAnyBit { arg, mask, errno } => {
            let (yes, no) = (rets.get(p, ret_errno(*errno)), rets.get(p, RET_ALLOW));
            p.jump(JMP_JSET_K, *mask, yes, no);
            p.load(arg_words(*arg).0)
        }
        Decision::Switch { arg, cases, otherwise } => {
            let answer = |a: &Answer| match a {
                Answer::Return(v) => *v,
                Answer::Violation => violation,
            };
            let low = arg_words(*arg).0;
            let mut next = rets.get(p, answer(otherwise));
            // Blocks first (each loads and masks the word again), then the exact values
            // on one load. The cases do not overlap, so their order does not matter.
            for case in cases.iter().filter(|c| c.bits < 32).rev() {
                let target = rets.get(p, answer(&case.answer));
                p.jump(JMP_JEQ_K, case.value & case.mask(), target, next);
                p.and(case.mask());
                next = p.load(low);
            }
            if cases.iter().all(|c| c.bits < 32) {
                return next;
            }
            for case in cases.iter().filter(|c| c.bits == 32).rev() {
                let target = rets.get(p, answer(&case.answer));
                next = p.jump(JMP_JEQ_K, case.value, target, next);
            }
            p.load(low)
        }
        Decision::AllowOnly { checks, errno } => {
            let refused = rets.get(p, ret_errno(*errno));
            let mut next = rets.get(p, RET_ALLOW);
            // Written backwards: the last check first. Each loads its word, masks it,
            // and goes on to the next check on any of its values, else refuses.
            for check in checks.iter().rev() {
                let mut candidate = refused;
                for value in check.values.iter().rev() {
                    candidate = p.jump(JMP_JEQ_K, *value, next, candidate);
                }
                if check.mask != u32::MAX {
                    p.and(check.mask);
                }
                next = p.load(arg_words(check.arg).0);
            }
            next
        }
        Decision::ErrnoIfNonZero { args, errno } => {
            let refused = rets.get(p, ret_errno(*errno));
            let mut next = rets.get(p, RET_ALLOW);
            // All 64 bits: the high word, then the low word, of each argument.
            for arg in args.iter().rev() {
                let (low, high) = arg_words(*arg);
                p.jump(JMP_JEQ_K, 0, next, refused);
                let high_zero = p.load(high);
                p.jump(JMP_JEQ_K, 0, high_zero, refused);
                next = p.load(low);
            }
            next
        }
    }
}

/// Return instructions already written, by value, so that nearby checks share them.
/// Forgotten at each small subtree ([`SHARED_RETURNS`]), so a return is never far from
/// its jumps.
#[derive(Default)]
struct Rets(Vec<(u32, Label)>);

impl Rets {
    fn get(&mut self, p: &mut Backwards, value: u32) -> Label {
        if let Some((_, label)) = self.0.iter().find(|(v, _)| *v == value) {
            return *label;
        }
        let label = p.ret(value);
        self.0.push((value, label));
        label
    }
}

/// The numbers as runs that partition `0..`: each run starts where the one before it
/// ends and holds one decision. Consecutive numbers with the same `Return` (and the
/// unlisted numbers between them, which get `default`) are one run; a call with
/// argument checks is a run of its own. The default profile's ~260 calls are ~130 runs.
fn runs<'a>(sorted: &[&'a (u32, Decision)], default: &'a Decision) -> Vec<(u32, &'a Decision)> {
    let mut runs: Vec<(u32, &Decision)> = Vec::new();
    let mut push = |start: u32, decision: &'a Decision| {
        let merges = matches!(decision, Decision::Return(_)) && runs.last().is_some_and(|(_, last)| *last == decision);
        if !merges {
            runs.push((start, decision));
        }
    };
    let mut next = 0;
    for (nr, decision) in sorted {
        if *nr > next {
            push(next, default);
        }
        push(*nr, decision);
        next = nr + 1;
    }
    push(next, default);
    runs
}

/// Runs of a subtree whose returns are shared: small enough that its jumps reach them
/// (8-bit offsets).
const SHARED_RETURNS: usize = 16;

/// The search over `runs` (the number in A): a binary tree of `nr >= start` whose
/// leaves are the runs' decisions. Subtrees of at most [`SHARED_RETURNS`] runs share
/// their return instructions.
fn write_tree(p: &mut Backwards, runs: &[(u32, &Decision)], violation: u32) -> Label {
    if runs.len() <= SHARED_RETURNS {
        return write_subtree(p, runs, violation, &mut Rets::default());
    }
    let (low, high) = runs.split_at(runs.len() / 2);
    let above = write_tree(p, high, violation);
    let below = write_tree(p, low, violation);
    p.jump(JMP_JGE_K, high[0].0, above, below)
}

fn write_subtree(p: &mut Backwards, runs: &[(u32, &Decision)], violation: u32, rets: &mut Rets) -> Label {
    if let [(_, decision)] = runs {
        return write_decision(p, decision, violation, rets);
    }
    let (low, high) = runs.split_at(runs.len() / 2);
    let above = write_subtree(p, high, violation, rets);
    let below = write_subtree(p, low, violation, rets);
    p.jump(JMP_JGE_K, high[0].0, above, below)
}

/// Build the program: `rules` in any order, distinct numbers; `default` for every
/// number not listed; `violation` is the value violations return.
///
/// The layout: the architecture check (anything but [`AUDIT_ARCH`] kills the process),
/// on x86_64 the x32 check (a number of 2^30 or more, x32's bit, kills the process,
/// except -1, the kernel's "no call", which gets `default`), then the search tree
/// ([`write_tree`]), then each call's argument checks (a decision's rules cover every
/// argument value, so nothing falls through). Pure: touches no kernel state.
pub fn build(rules: &[(u32, Decision)], default: u32, violation: u32) -> Result<Vec<Insn>, String> {
    let mut sorted: Vec<&(u32, Decision)> = rules.iter().collect();
    sorted.sort_unstable_by_key(|(nr, _)| *nr);
    if sorted.windows(2).any(|w| w[0].0 == w[1].0) {
        return Err("a system call listed twice".into());
    }
    for (nr, decision) in &sorted {
        let arg = |i: u32| if i < 6 { Ok(()) } else { Err(format!("system call {nr}: no argument {i}")) };
        match decision {
            Decision::Return(_) => {}
            Decision::ViolationIfAnyBit { arg: i, .. } | Decision::ErrnoIfAnyBit { arg: i, .. } => arg(*i)?,
            Decision::ErrnoIfNonZero { args, .. } => args.iter().try_for_each(|i| arg(*i))?,
            Decision::AllowOnly { checks, .. } => {
                for check in checks {
                    arg(check.arg)?;
                    if check.values.is_empty() || check.values.iter().any(|v| v & !check.mask != 0) {
                        return Err(format!("system call {nr}: a check needs masked values"));
                    }
                }
            }
            Decision::Switch { arg: i, cases, .. } => {
                arg(*i)?;
                if cases.iter().any(|c| !(1..=32).contains(&c.bits)) {
                    return Err(format!("system call {nr}: a case fixes 1 to 32 bits"));
                }
                let overlapping = cases.iter().enumerate().any(|(i, a)| {
                    cases[i + 1..].iter().any(|b| a.matches(b.value & b.mask()) || b.matches(a.value & a.mask()))
                });
                if overlapping {
                    return Err(format!("system call {nr}: overlapping argument cases"));
                }
            }
        }
    }
    let mut p = Backwards { reversed: Vec::with_capacity(1024) };
    // Written backwards: what is written last runs first. The load of the number must
    // fall through to the x32 check (x86_64) or straight into the tree.
    #[cfg(not(target_arch = "x86_64"))]
    let kill = p.ret(RET_KILL_PROCESS);
    let default_decision = Decision::Return(default);
    let tree = write_tree(&mut p, &runs(&sorted, &default_decision), violation);
    #[cfg(target_arch = "x86_64")]
    let kill = {
        let kill = p.ret(RET_KILL_PROCESS);
        let skip = p.ret(default);
        let x32 = p.jump(JMP_JEQ_K, u32::MAX, skip, kill);
        p.jump(JMP_JGE_K, 0x4000_0000, x32, tree);
        kill
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = tree;
    let nr = p.load(NR_OFFSET);
    p.jump(JMP_JEQ_K, AUDIT_ARCH, nr, kill);
    p.load(ARCH_OFFSET);
    if p.reversed.len() > MAX_INSNS {
        return Err(format!("{} instructions, over the kernel's {MAX_INSNS}", p.reversed.len()));
    }
    p.reversed.reverse();
    Ok(p.reversed)
}

/// Install `program` on the calling thread with `seccomp(SECCOMP_SET_MODE_FILTER, flags)`
/// and return what the kernel returned (a listener fd with
/// `SECCOMP_FILTER_FLAG_NEW_LISTENER`). Allocates nothing: a forked child may call it.
/// The caller must have set `no_new_privs` unless it holds `CAP_SYS_ADMIN`.
pub fn install(program: &[Insn], flags: libc::c_ulong) -> std::io::Result<i32> {
    let prog = libc::sock_fprog { len: program.len() as u16, filter: program.as_ptr() as *mut libc::sock_filter };
    // SAFETY: `Insn` has the kernel's `sock_filter` layout (u16, u8, u8, u32, repr(C)),
    // `prog` points at `len` of them, and the kernel copies the program during the call.
    let rc = unsafe {
        libc::syscall(libc::SYS_seccomp, libc::SECCOMP_SET_MODE_FILTER, flags, &prog as *const libc::sock_fprog)
    };
    if rc < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(rc as i32)
}

/// Run a program on (arch, nr, args) as the kernel would (classic BPF as seccomp
/// accepts it): the returned value and how many instructions ran. For tests of the
/// generator and for measurements; panics on anything the kernel would refuse.
pub fn run(program: &[Insn], arch: u32, nr: u32, args: [u64; 6]) -> (u32, usize) {
    // struct seccomp_data: nr, arch, instruction_pointer (u64), args[6] (u64 each).
    let word = |offset: u32| -> u32 {
        match offset {
            0 => nr,
            4 => arch,
            8 | 12 => 0,
            o if (16..64).contains(&o) && o % 4 == 0 => {
                let arg = args[((o - 16) / 8) as usize];
                if (o - 16) % 8 == 0 {
                    arg as u32
                } else {
                    (arg >> 32) as u32
                }
            }
            o => panic!("load of offset {o}"),
        }
    };
    let (mut pc, mut a, mut x, mut mem, mut steps) = (0usize, 0u32, 0u32, [0u32; 16], 0usize);
    loop {
        let i = *program.get(pc).expect("the program runs off its end");
        pc += 1;
        steps += 1;
        let src = if i.code & 0x08 != 0 { x } else { i.k };
        match i.code & 0x07 {
            // BPF_LD: absolute word, immediate, scratch memory, packet length.
            0x00 => match i.code & 0xe0 {
                0x20 => a = word(i.k),
                0x00 => a = i.k,
                0x60 => a = mem[i.k as usize],
                0x80 => a = 64,
                m => panic!("ld mode {m:#x}"),
            },
            // BPF_LDX
            0x01 => match i.code & 0xe0 {
                0x00 => x = i.k,
                0x60 => x = mem[i.k as usize],
                0x80 => x = 64,
                m => panic!("ldx mode {m:#x}"),
            },
            0x02 => mem[i.k as usize] = a,
            0x03 => mem[i.k as usize] = x,
            // BPF_ALU
            0x04 => {
                a = match i.code & 0xf0 {
                    0x00 => a.wrapping_add(src),
                    0x10 => a.wrapping_sub(src),
                    0x20 => a.wrapping_mul(src),
                    0x30 => a / src,
                    0x40 => a | src,
                    0x50 => a & src,
                    0x60 => a.checked_shl(src).unwrap_or(0),
                    0x70 => a.checked_shr(src).unwrap_or(0),
                    0x80 => a.wrapping_neg(),
                    0x90 => a % src,
                    0xa0 => a ^ src,
                    op => panic!("alu op {op:#x}"),
                }
            }
            // BPF_JMP
            0x05 => {
                let taken = match i.code & 0xf0 {
                    0x00 => {
                        pc += i.k as usize;
                        continue;
                    }
                    0x10 => a == src,
                    0x20 => a > src,
                    0x30 => a >= src,
                    0x40 => a & src != 0,
                    op => panic!("jmp op {op:#x}"),
                };
                pc += if taken { i.jt } else { i.jf } as usize;
            }
            // BPF_RET: a constant or A.
            0x06 => return (if i.code & 0x18 == 0x10 { a } else { i.k }, steps),
            // BPF_MISC: TXA or TAX.
            _ => {
                if i.code & 0xf8 == 0x80 {
                    a = x
                } else {
                    x = a
                }
            }
        }
    }
}

/// The libseccomp generator this module replaced, kept as the reference the tests
/// compare the program with (see the module's documentation).
#[cfg(test)]
pub(crate) mod reference {
    use super::*;
    use libseccomp::{ScmpAction, ScmpArgCompare, ScmpCompareOp, ScmpFilterContext, ScmpSyscall};
    use std::io::{Read, Seek, SeekFrom};

    /// One libseccomp rule: an action and the argument comparisons that must all hold.
    struct Rule {
        action: u32,
        conditions: Vec<ScmpArgCompare>,
    }

    impl Rule {
        fn new(action: u32, conditions: Vec<ScmpArgCompare>) -> Self {
            Rule { action, conditions }
        }
    }

    /// `(args[arg] & mask) == value` on all 64 bits; with a mask below 2^32 only the low
    /// 32 bits count, which is what the kernel reads of an `int` argument such as `ioctl`'s
    /// request or `clone`'s flags: garbage in the upper half cannot dodge the rule.
    fn masked(arg: u32, mask: u32, value: u32) -> ScmpArgCompare {
        ScmpArgCompare::new(arg, ScmpCompareOp::MaskedEqual(u64::from(mask)), u64::from(value))
    }

    /// The rules for one decision. Every decision is split into rules whose conditions do
    /// not overlap and together cover every argument value, so the order libseccomp gives
    /// them cannot matter, and nothing falls through to the default by accident.
    fn rules_for(decision: &Decision, violation: u32) -> Vec<Rule> {
        match decision {
            Decision::Return(value) => vec![Rule::new(*value, Vec::new())],
            Decision::ViolationIfAnyBit { arg, mask } => any_bit(*arg, *mask, violation),
            Decision::ErrnoIfAnyBit { arg, mask, errno } => any_bit(*arg, *mask, ret_errno(*errno)),
            Decision::Switch { arg, cases, otherwise } => {
                let answer = |a: &Answer| match a {
                    Answer::Return(v) => *v,
                    Answer::Violation => violation,
                };
                let mut rules: Vec<Rule> = cases
                    .iter()
                    .map(|c| Rule::new(answer(&c.answer), vec![masked(*arg, c.mask(), c.value & c.mask())]))
                    .collect();
                // "None of the cases" is not one comparison: it is the union of the bit
                // patterns that leave the cases' binary trie (at most 32 per case).
                let patterns: Vec<(u32, u32)> = cases.iter().map(|c| (c.value & c.mask(), c.bits)).collect();
                let mut outside = Vec::new();
                complement(&patterns, 31, 0, 0, &mut outside);
                rules.extend(
                    outside
                        .into_iter()
                        .map(|(mask, value)| Rule::new(answer(otherwise), vec![masked(*arg, mask, value)])),
                );
                rules
            }
            Decision::ErrnoIfNonZero { args, errno } => {
                let mut rules: Vec<Rule> = args
                    .iter()
                    .map(|i| Rule::new(ret_errno(*errno), vec![ScmpArgCompare::new(*i, ScmpCompareOp::NotEqual, 0)]))
                    .collect();
                rules.push(Rule::new(
                    RET_ALLOW,
                    args.iter().map(|i| ScmpArgCompare::new(*i, ScmpCompareOp::Equal, 0)).collect(),
                ));
                rules
            }
            Decision::AllowOnly { checks, errno } => {
                // Allowed: one rule per combination of the checks' values. Refused: a
                // check fails, i.e. its masked word is outside its values; with a full
                // mask that is the complement of exact patterns, else one differing bit.
                let mut allowed: Vec<Vec<ScmpArgCompare>> = vec![Vec::new()];
                for check in checks {
                    allowed = allowed
                        .into_iter()
                        .flat_map(|conds| {
                            check.values.iter().map(move |v| {
                                let mut c = conds.clone();
                                c.push(masked(check.arg, check.mask, *v));
                                c
                            })
                        })
                        .collect();
                }
                let mut rules: Vec<Rule> = allowed.into_iter().map(|c| Rule::new(RET_ALLOW, c)).collect();
                for check in checks {
                    let outside: Vec<(u32, u32)> = if check.mask == u32::MAX {
                        let patterns: Vec<(u32, u32)> = check.values.iter().map(|v| (*v, 32)).collect();
                        let mut out = Vec::new();
                        complement(&patterns, 31, 0, 0, &mut out);
                        out
                    } else {
                        assert_eq!(check.values.len(), 1, "the reference handles one value under a partial mask");
                        (0..32)
                            .map(|b| 1u32 << b)
                            .filter(|b| check.mask & b != 0)
                            .map(|b| (b, (check.values[0] & b) ^ b))
                            .collect()
                    };
                    rules.extend(
                        outside
                            .into_iter()
                            .map(|(mask, value)| Rule::new(ret_errno(*errno), vec![masked(check.arg, mask, value)])),
                    );
                }
                rules
            }
        }
    }

    /// `action` when the low 32 bits of `args[arg]` have any bit of `mask`, else allow.
    fn any_bit(arg: u32, mask: u32, action: u32) -> Vec<Rule> {
        let mut rules: Vec<Rule> = (0..32)
            .map(|b| 1u32 << b)
            .filter(|b| mask & b != 0)
            .map(|b| Rule::new(action, vec![masked(arg, b, b)]))
            .collect();
        rules.push(Rule::new(RET_ALLOW, vec![masked(arg, mask, 0)]));
        rules
    }

    /// A value and how many of its high bits are fixed.
    type Pattern = (u32, u32);

    /// The 32-bit values outside every pattern `(value, bits)` (its high `bits` bits fixed),
    /// as (mask, value) comparisons: walk the binary trie of the patterns from bit 31 down;
    /// every branch no pattern takes is one comparison, and a branch a pattern fixes
    /// entirely is covered.
    pub(crate) fn complement(patterns: &[Pattern], bit: i32, mask: u32, prefix: u32, out: &mut Vec<(u32, u32)>) {
        if patterns.is_empty() {
            out.push((mask, prefix));
            return;
        }
        let decided = (31 - bit) as u32;
        if bit < 0 || patterns.iter().any(|(_, bits)| *bits <= decided) {
            return;
        }
        let b = 1u32 << bit;
        let (ones, zeros): (Vec<Pattern>, Vec<Pattern>) = patterns.iter().partition(|(v, _)| *v & b != 0);
        complement(&zeros, bit - 1, mask | b, prefix, out);
        complement(&ones, bit - 1, mask | b, prefix | b, out);
    }

    /// The libseccomp action for a `SECCOMP_RET_*` value.
    fn action(value: u32) -> Result<ScmpAction, String> {
        Ok(match value {
            RET_ALLOW => ScmpAction::Allow,
            RET_KILL_PROCESS => ScmpAction::KillProcess,
            RET_TRAP => ScmpAction::Trap,
            RET_USER_NOTIF => ScmpAction::Notify,
            v if v & 0xffff_0000 == 0x0005_0000 => ScmpAction::Errno((v & 0xffff) as i32),
            v => return Err(format!("no libseccomp action for {v:#x}")),
        })
    }

    /// Build the program: `rules` in any order, distinct numbers; `default` for every
    /// number not listed; `violation` is the value violations return.
    ///
    /// libseccomp generates it: the architecture check first (a foreign architecture or an
    /// x32 call kills the process), then a binary tree over the system call numbers
    /// (`SCMP_FLTATR_CTL_OPTIMIZE` = 2). Touches no kernel state beyond libseccomp's probe
    /// of which actions the kernel supports; call it before `fork`, never after.
    pub fn build_with_libseccomp(rules: &[(u32, Decision)], default: u32, violation: u32) -> Result<Vec<Insn>, String> {
        let mut numbers: Vec<u32> = rules.iter().map(|(nr, _)| *nr).collect();
        numbers.sort_unstable();
        if numbers.windows(2).any(|w| w[0] == w[1]) {
            return Err("a system call listed twice".into());
        }
        let fail = |what: &'static str| move |e: libseccomp::error::SeccompError| format!("libseccomp: {what}: {e}");
        let mut ctx = ScmpFilterContext::new(action(default)?).map_err(fail("seccomp_init"))?;
        ctx.set_act_badarch(ScmpAction::KillProcess).map_err(fail("bad-architecture action"))?;
        // The program is exported, never loaded by libseccomp: the caller sets
        // no_new_privs itself, in the child.
        ctx.set_ctl_nnp(false).map_err(fail("no_new_privs attribute"))?;
        ctx.set_ctl_optimize(2).map_err(fail("binary-tree optimisation"))?;
        for (nr, decision) in rules {
            if let Decision::Switch { cases, .. } = decision {
                let overlapping = cases.iter().enumerate().any(|(i, a)| {
                    cases[i + 1..].iter().any(|b| a.matches(b.value & b.mask()) || b.matches(a.value & a.mask()))
                });
                if overlapping {
                    return Err(format!("system call {nr}: overlapping argument cases"));
                }
            }
            let syscall =
                ScmpSyscall::from(i32::try_from(*nr).map_err(|_| format!("system call number {nr} out of range"))?);
            for rule in rules_for(decision, violation) {
                // libseccomp refuses a rule that repeats the default; the default applies
                // to whatever no rule matches anyway.
                if rule.action == default {
                    continue;
                }
                ctx.add_rule_conditional_exact(action(rule.action)?, syscall, &rule.conditions)
                    .map_err(|e| format!("libseccomp: rule for system call {nr}: {e}"))?;
            }
        }
        let mut file =
            std::fs::File::from(crate::sys::memfd(c"rsandbox-seccomp").map_err(|e| format!("memfd_create: {e}"))?);
        ctx.export_bpf(&file).map_err(fail("seccomp_export_bpf"))?;
        let mut bytes = Vec::new();
        file.seek(SeekFrom::Start(0))
            .and_then(|_| file.read_to_end(&mut bytes))
            .map_err(|e| format!("reading the exported program: {e}"))?;
        decode(&bytes)
    }

    /// `struct sock_filter`s as libseccomp writes them (native byte order).
    fn decode(bytes: &[u8]) -> Result<Vec<Insn>, String> {
        if bytes.is_empty() || !bytes.len().is_multiple_of(8) {
            return Err(format!("libseccomp exported {} bytes, not a program", bytes.len()));
        }
        let code: Vec<Insn> = bytes
            .chunks_exact(8)
            .map(|c| Insn {
                code: u16::from_ne_bytes([c[0], c[1]]),
                jt: c[2],
                jf: c[3],
                k: u32::from_ne_bytes([c[4], c[5], c[6], c[7]]),
            })
            .collect();
        if code.len() > 4096 {
            return Err(format!("{} instructions, over the kernel's 4096", code.len()));
        }
        Ok(code)
    }
}

#[cfg(test)]
mod tests {
    use super::reference::{build_with_libseccomp, complement};
    use super::*;

    fn ret(program: &[Insn], arch: u32, nr: u32, args: [u64; 6]) -> u32 {
        run(program, arch, nr, args).0
    }

    #[test]
    fn search_finds_every_listed_number_and_defaults_the_rest() {
        let rules: Vec<(u32, Decision)> = (0..400)
            .filter(|n| n % 3 != 0)
            .map(|n| (n, Decision::Return(if n % 2 == 0 { RET_ALLOW } else { ret_errno(n as i32) })))
            .collect();
        let program = build(&rules, ret_errno(libc::ENOSYS), RET_TRAP).unwrap();
        for nr in 0..1024u32 {
            let want = if nr < 400 && nr % 3 != 0 {
                if nr % 2 == 0 {
                    RET_ALLOW
                } else {
                    ret_errno(nr as i32)
                }
            } else {
                ret_errno(libc::ENOSYS)
            };
            assert_eq!(ret(&program, AUDIT_ARCH, nr, [0; 6]), want, "nr {nr}");
        }
        assert_eq!(ret(&program, 0x4000_0003, 1, [0; 6]), RET_KILL_PROCESS, "another architecture");
        #[cfg(target_arch = "x86_64")]
        assert_eq!(ret(&program, AUDIT_ARCH, X32_SYSCALL_BIT | 1, [0; 6]), RET_KILL_PROCESS, "x32");
    }

    #[test]
    fn argument_rules() {
        let rules = vec![
            (10, Decision::ViolationIfAnyBit { arg: 0, mask: 0x1000_0000 }),
            (
                20,
                Decision::Switch {
                    arg: 1,
                    cases: vec![Case::exact(7, Answer::Violation), Case::exact(9, Answer::Violation)],
                    otherwise: Answer::Return(RET_ALLOW),
                },
            ),
            (
                40,
                Decision::Switch {
                    arg: 0,
                    cases: vec![
                        Case::exact(0x8a27, Answer::Violation),
                        Case { value: 0x8900, bits: 24, answer: Answer::Return(ret_errno(libc::EPERM)) },
                    ],
                    otherwise: Answer::Return(RET_ALLOW),
                },
            ),
            (30, Decision::ErrnoIfNonZero { args: vec![0, 1], errno: libc::EPERM }),
        ];
        let p = build(&rules, ret_errno(libc::ENOSYS), RET_USER_NOTIF).unwrap();
        assert_eq!(ret(&p, AUDIT_ARCH, 10, [0x1000_0011, 0, 0, 0, 0, 0]), RET_USER_NOTIF);
        assert_eq!(ret(&p, AUDIT_ARCH, 10, [0x11, 0, 0, 0, 0, 0]), RET_ALLOW);
        assert_eq!(ret(&p, AUDIT_ARCH, 20, [0, 9, 0, 0, 0, 0]), RET_USER_NOTIF);
        assert_eq!(ret(&p, AUDIT_ARCH, 20, [0, (1 << 32) | 9, 0, 0, 0, 0]), RET_USER_NOTIF, "low 32 bits compared");
        assert_eq!(ret(&p, AUDIT_ARCH, 20, [0, 8, 0, 0, 0, 0]), RET_ALLOW);
        assert_eq!(ret(&p, AUDIT_ARCH, 40, [0x8a27, 0, 0, 0, 0, 0]), RET_USER_NOTIF);
        assert_eq!(ret(&p, AUDIT_ARCH, 40, [0x8927, 0, 0, 0, 0, 0]), ret_errno(libc::EPERM));
        assert_eq!(ret(&p, AUDIT_ARCH, 40, [0x8a28, 0, 0, 0, 0, 0]), RET_ALLOW);
        assert_eq!(ret(&p, AUDIT_ARCH, 30, [0, 0, 5, 0, 0, 0]), RET_ALLOW);
        assert_eq!(ret(&p, AUDIT_ARCH, 30, [0, 1 << 40, 0, 0, 0, 0]), ret_errno(libc::EPERM), "high 32 bits compared");
        assert_eq!(ret(&p, AUDIT_ARCH, 30, [3, 0, 0, 0, 0, 0]), ret_errno(libc::EPERM));
        assert_eq!(ret(&p, AUDIT_ARCH, 10, [(1 << 40) | 0x1000_0000, 0, 0, 0, 0, 0]), RET_USER_NOTIF);
        assert_eq!(ret(&p, AUDIT_ARCH, 10, [1 << 40, 0, 0, 0, 0, 0]), RET_ALLOW, "only the low 32 bits are flags");
    }

    #[test]
    fn overlapping_cases_are_refused_and_blocks_match_their_range() {
        let overlapping = Decision::Switch {
            arg: 0,
            cases: vec![
                Case::exact(0x8927, Answer::Violation),
                Case { value: 0x8900, bits: 24, answer: Answer::Violation },
            ],
            otherwise: Answer::Return(RET_ALLOW),
        };
        assert!(build(&[(40, overlapping)], ret_errno(libc::ENOSYS), RET_TRAP).unwrap_err().contains("overlapping"));
        let block = vec![(
            40,
            Decision::Switch {
                arg: 1,
                cases: vec![Case { value: 0x8900, bits: 24, answer: Answer::Return(ret_errno(libc::EPERM)) }],
                otherwise: Answer::Return(RET_ALLOW),
            },
        )];
        let p = build(&block, ret_errno(libc::ENOSYS), RET_TRAP).unwrap();
        for (request, want) in [
            (0x8912, ret_errno(libc::EPERM)),
            (0x89ff, ret_errno(libc::EPERM)),
            (0x8900, ret_errno(libc::EPERM)),
            (0x88ff, RET_ALLOW),
            (0x8a00, RET_ALLOW),
            (0x5401, RET_ALLOW),
            ((1 << 32) | 0x8946, ret_errno(libc::EPERM)),
        ] {
            assert_eq!(ret(&p, AUDIT_ARCH, 40, [3, request, 0, 0, 0, 0]), want, "{request:#x}");
        }
    }

    #[test]
    fn complement_covers_everything_but_the_values() {
        let values = [libc::TIOCSTI as u32, libc::TIOCLINUX as u32, 0, u32::MAX];
        let exact: Vec<(u32, u32)> = values.iter().map(|v| (*v, 32)).collect();
        let mut patterns = Vec::new();
        complement(&exact, 31, 0, 0, &mut patterns);
        let hits = |x: u32| patterns.iter().filter(|(m, v)| x & m == *v).count();
        for v in values {
            assert_eq!(hits(v), 0, "{v:#x}");
        }
        let mut x = 0x1234_5678u32;
        for _ in 0..100_000 {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            for y in [x, x & 0xffff, values[0] ^ (1 << (x % 32))] {
                assert_eq!(hits(y), usize::from(!values.contains(&y)), "{y:#x}: exactly one pattern");
            }
        }
    }

    /// Both generators answer alike for every number 0..=1023 (and the x32 and -1
    /// numbers) with zeros, all ones and pseudo-random arguments, garbage in the upper
    /// halves included.
    fn same_as_libseccomp(rules: &[(u32, Decision)], default: u32, violation: u32) {
        let ours = build(rules, default, violation).unwrap();
        let theirs = build_with_libseccomp(rules, default, violation).unwrap();
        let mut samples = vec![[0; 6], [u64::MAX; 6]];
        let mut x = 0x2545_f491_4f6c_dd1du64;
        for _ in 0..64 {
            let mut args = [0; 6];
            for a in &mut args {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                *a = match x % 4 {
                    0 => x & 0xffff,
                    1 => x & 0xffff_ffff,
                    2 => x & 0x1_0000_ffff,
                    _ => x,
                };
            }
            samples.push(args);
        }
        let numbers = (0..1024u32).chain([u32::MAX, 0x4000_0000, 0x4000_0001, 0x7fff_ffff, 0xbfff_ffff]);
        for nr in numbers {
            for args in &samples {
                let (got, want) = (ret(&ours, AUDIT_ARCH, nr, *args), ret(&theirs, AUDIT_ARCH, nr, *args));
                assert_eq!(got, want, "nr {nr:#x} args {args:x?}");
            }
        }
        assert_eq!(ret(&ours, 0x4000_0003, 1, [0; 6]), ret(&theirs, 0x4000_0003, 1, [0; 6]));
    }

    #[test]
    fn matches_libseccomp() {
        let search: Vec<(u32, Decision)> = (0..400)
            .filter(|n| n % 3 != 0)
            .map(|n| (n, Decision::Return(if n % 2 == 0 { RET_ALLOW } else { ret_errno(n as i32) })))
            .collect();
        same_as_libseccomp(&search, ret_errno(libc::ENOSYS), RET_TRAP);
        let arguments = vec![
            (10, Decision::ViolationIfAnyBit { arg: 0, mask: 0x1000_0000 }),
            (11, Decision::ErrnoIfAnyBit { arg: 5, mask: 0x8000_0101, errno: libc::EPERM }),
            (
                20,
                Decision::Switch {
                    arg: 1,
                    cases: vec![Case::exact(7, Answer::Violation), Case::exact(9, Answer::Return(RET_TRAP))],
                    otherwise: Answer::Return(RET_ALLOW),
                },
            ),
            (
                40,
                Decision::Switch {
                    arg: 0,
                    cases: vec![
                        Case::exact(0x8a27, Answer::Violation),
                        Case { value: 0x8900, bits: 24, answer: Answer::Return(ret_errno(libc::EPERM)) },
                        Case { value: 0x0001_0000, bits: 16, answer: Answer::Return(ret_errno(libc::EACCES)) },
                    ],
                    otherwise: Answer::Return(RET_ALLOW),
                },
            ),
            (
                41,
                Decision::Switch {
                    arg: 2,
                    cases: vec![Case { value: 0x8900, bits: 24, answer: Answer::Violation }],
                    otherwise: Answer::Return(ret_errno(libc::EPERM)),
                },
            ),
            (30, Decision::ErrnoIfNonZero { args: vec![0, 1, 4], errno: libc::EPERM }),
            (300, Decision::Return(RET_ALLOW)),
        ];
        same_as_libseccomp(&arguments, ret_errno(libc::ENOSYS), RET_USER_NOTIF);
    }

    #[test]
    fn far_jumps_go_through_unconditional_ones() {
        // One call with a long switch: its checks are further than 255 instructions
        // from the returns of the leaf before them.
        let cases: Vec<Case> = (0..300).map(|v| Case::exact(v * 3, Answer::Return(ret_errno(libc::EPERM)))).collect();
        let rules: Vec<(u32, Decision)> = (0..40)
            .map(|n| (n, Decision::Return(RET_ALLOW)))
            .chain([(40, Decision::Switch { arg: 0, cases, otherwise: Answer::Return(RET_ALLOW) })])
            .collect();
        let p = build(&rules, ret_errno(libc::ENOSYS), RET_TRAP).unwrap();
        assert!(p.iter().any(|i| i.code == JMP_JA), "no unconditional jump needed");
        for v in [0, 3, 897, 898, 1, 900] {
            let want = if v % 3 == 0 && v < 900 { ret_errno(libc::EPERM) } else { RET_ALLOW };
            assert_eq!(ret(&p, AUDIT_ARCH, 40, [v, 0, 0, 0, 0, 0]), want, "{v}");
        }
        same_as_libseccomp(&rules, ret_errno(libc::ENOSYS), RET_TRAP);
    }

    #[test]
    fn duplicates_are_refused() {
        let rules = vec![(1, Decision::Return(RET_ALLOW)), (1, Decision::Return(RET_TRAP))];
        assert!(build(&rules, ret_errno(libc::ENOSYS), RET_TRAP).is_err());
    }
}
