//! The seccomp program generator: one classic-BPF program that checks the architecture,
//! then finds the system call by binary search over the sorted numbers and jumps to
//! what the policy says for it. The program is built once (in the zygote) and only
//! installed after `fork`.
//!
//! Why not stacked linear filters: the kernel runs every installed filter on every
//! system call and JIT-compiles each at install time; four linear filters of ~250
//! comparisons cost ~1 ms per child and hundreds of instructions per call. Here a call
//! costs about 30 instructions, and one program is compiled.
//!
//! Layout. Conditional jumps in classic BPF reach at most 255 instructions, so they
//! only ever skip one instruction; every longer jump is an unconditional `ja` (32-bit
//! offset) to a label resolved at the end. Actions live in blocks after the search tree.
//!
//! Tested without a kernel by the interpreter below (every number 0..=1023, both
//! profiles, the argument rules), and against the kernel in `tests/layers.rs`.

/// One classic-BPF instruction, laid out as the kernel's `struct sock_filter`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Insn {
    code: u16,
    jt: u8,
    jf: u8,
    k: u32,
}

const LD_W_ABS: u16 = 0x20;
const JEQ_K: u16 = 0x15;
const JGE_K: u16 = 0x35;
const JSET_K: u16 = 0x45;
const JA: u16 = 0x05;
const RET_K: u16 = 0x06;

/// Offsets in `struct seccomp_data`.
const NR: u32 = 0;
const ARCH: u32 = 4;
/// Low and high 32 bits of argument `i` (little-endian).
const fn arg_low(i: u32) -> u32 {
    16 + 8 * i
}
const fn arg_high(i: u32) -> u32 {
    20 + 8 * i
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
#[cfg(target_arch = "x86_64")]
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
    /// The violation action when `args[arg]`'s low 32 bits equal one of `values`, else
    /// allow (`ioctl` requests).
    ViolationIfOneOf { arg: u32, values: Vec<u32> },
    /// `errno` when any of `args` is non-zero (all 64 bits), else allow (calls that may
    /// act on the caller only).
    ErrnoIfNonZero { args: Vec<u32>, errno: i32 },
    /// `errno` when `args[arg]`'s low 32 bits have any of `mask`'s bits, else allow.
    ErrnoIfAnyBit { arg: u32, mask: u32, errno: i32 },
}

#[derive(Clone, Copy, PartialEq, Eq)]
struct Label(usize);

struct Assembler {
    code: Vec<Insn>,
    /// Instruction index of each label, once placed.
    labels: Vec<Option<usize>>,
    /// `ja` instructions to patch: (instruction index, label).
    fixups: Vec<(usize, Label)>,
}

impl Assembler {
    fn label(&mut self) -> Label {
        self.labels.push(None);
        Label(self.labels.len() - 1)
    }

    fn place(&mut self, label: Label) {
        self.labels[label.0] = Some(self.code.len());
    }

    fn op(&mut self, code: u16, jt: u8, jf: u8, k: u32) {
        self.code.push(Insn { code, jt, jf, k });
    }

    fn load(&mut self, offset: u32) {
        self.op(LD_W_ABS, 0, 0, offset);
    }

    fn ret(&mut self, value: u32) {
        self.op(RET_K, 0, 0, value);
    }

    fn jump(&mut self, to: Label) {
        self.fixups.push((self.code.len(), to));
        self.op(JA, 0, 0, 0);
    }

    /// `if A <cmp> k { next } else { skip one }`, followed by a `ja` to `to`: taken when
    /// the comparison holds.
    fn jump_if(&mut self, cmp: u16, k: u32, to: Label) {
        self.op(cmp, 0, 1, k);
        self.jump(to);
    }

    /// `ja` to `to` when the comparison does not hold.
    fn jump_unless(&mut self, cmp: u16, k: u32, to: Label) {
        self.op(cmp, 1, 0, k);
        self.jump(to);
    }

    fn finish(mut self) -> Result<Vec<Insn>, String> {
        for (at, label) in std::mem::take(&mut self.fixups) {
            let target = self.labels[label.0].ok_or("a jump to a label never placed")?;
            let offset = target.checked_sub(at + 1).ok_or("a backward jump (BPF jumps only forward)")?;
            self.code[at].k = u32::try_from(offset).map_err(|_| "jump too far")?;
        }
        if self.code.len() > 4096 {
            return Err(format!("{} instructions, over the kernel's 4096", self.code.len()));
        }
        Ok(self.code)
    }
}

/// Build the program: `rules` sorted or not, distinct numbers; `default` for every
/// number not listed; `violation` is the value violations return.
pub fn build(rules: &[(u32, Decision)], default: u32, violation: u32) -> Result<Vec<Insn>, String> {
    let mut a = Assembler { code: Vec::new(), labels: Vec::new(), fixups: Vec::new() };
    let (allow, deny_default, violate) = (a.label(), a.label(), a.label());

    a.load(ARCH);
    a.op(JEQ_K, 1, 0, AUDIT_ARCH);
    a.ret(RET_KILL_PROCESS);
    a.load(NR);
    #[cfg(target_arch = "x86_64")]
    {
        a.op(JGE_K, 0, 1, X32_SYSCALL_BIT);
        a.ret(RET_KILL_PROCESS);
    }

    let mut sorted: Vec<(u32, Label, &Decision)> = Vec::with_capacity(rules.len());
    for (nr, decision) in rules {
        let target = match decision {
            Decision::Return(v) if *v == RET_ALLOW => allow,
            Decision::Return(v) if *v == violation => violate,
            Decision::Return(v) if *v == default => deny_default,
            _ => a.label(),
        };
        sorted.push((*nr, target, decision));
    }
    sorted.sort_by_key(|(nr, _, _)| *nr);
    if sorted.windows(2).any(|w| w[0].0 == w[1].0) {
        return Err("a system call listed twice".into());
    }
    let items: Vec<(u32, Label)> = sorted.iter().map(|(nr, l, _)| (*nr, *l)).collect();
    search(&mut a, &items, deny_default);

    // The blocks, each ending in a return or a jump to a shared return.
    for (_, label, decision) in &sorted {
        if [allow, violate, deny_default].contains(label) {
            continue;
        }
        a.place(*label);
        match decision {
            Decision::Return(v) => a.ret(*v),
            Decision::ViolationIfAnyBit { arg, mask } => {
                a.load(arg_low(*arg));
                a.jump_if(JSET_K, *mask, violate);
                a.jump(allow);
            }
            Decision::ViolationIfOneOf { arg, values } => {
                a.load(arg_low(*arg));
                for v in values {
                    a.jump_if(JEQ_K, *v, violate);
                }
                a.jump(allow);
            }
            Decision::ErrnoIfAnyBit { arg, mask, errno } => {
                let refuse = a.label();
                a.load(arg_low(*arg));
                a.jump_if(JSET_K, *mask, refuse);
                a.jump(allow);
                a.place(refuse);
                a.ret(ret_errno(*errno));
            }
            Decision::ErrnoIfNonZero { args, errno } => {
                let refuse = a.label();
                for i in args {
                    for offset in [arg_low(*i), arg_high(*i)] {
                        a.load(offset);
                        a.jump_unless(JEQ_K, 0, refuse);
                    }
                }
                a.jump(allow);
                a.place(refuse);
                a.ret(ret_errno(*errno));
            }
        }
    }
    a.place(allow);
    a.ret(RET_ALLOW);
    a.place(violate);
    a.ret(violation);
    a.place(deny_default);
    a.ret(default);
    a.finish()
}

/// Binary search over `items` (sorted by number) with the number in A.
fn search(a: &mut Assembler, items: &[(u32, Label)], otherwise: Label) {
    if items.len() <= 3 {
        for (nr, target) in items {
            a.jump_if(JEQ_K, *nr, *target);
        }
        a.jump(otherwise);
        return;
    }
    let (low, high) = items.split_at(items.len() / 2);
    let upper = a.label();
    a.jump_if(JGE_K, high[0].0, upper);
    search(a, low, otherwise);
    a.place(upper);
    search(a, high, otherwise);
}

/// Install `program` on the calling thread with `seccomp(SECCOMP_SET_MODE_FILTER, flags)`
/// and return what the kernel returned (a listener fd with
/// `SECCOMP_FILTER_FLAG_NEW_LISTENER`). Allocates nothing: a forked child may call it.
/// The caller must have set `no_new_privs` unless it holds `CAP_SYS_ADMIN`.
pub fn install(program: &[Insn], flags: libc::c_ulong) -> std::io::Result<i32> {
    let prog = libc::sock_fprog { len: program.len() as u16, filter: program.as_ptr() as *mut libc::sock_filter };
    // SAFETY: `Insn` has the kernel's `sock_filter` layout (u16, u8, u8, u32, repr(C)),
    // `prog` points at `len` of them, and the kernel copies the program during the call.
    let rc = unsafe { libc::syscall(libc::SYS_seccomp, libc::SECCOMP_SET_MODE_FILTER, flags, &prog as *const libc::sock_fprog) };
    if rc < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(rc as i32)
}

/// Run a program on (arch, nr, args), as the kernel would: for tests of the generator.
#[cfg(test)]
pub fn run(program: &[Insn], arch: u32, nr: u32, args: [u64; 6]) -> u32 {
    let word = |offset: u32| -> u32 {
        match offset {
            NR => nr,
            ARCH => arch,
            o if (16..64).contains(&o) => {
                let arg = args[((o - 16) / 8) as usize];
                if (o - 16) % 8 == 0 { arg as u32 } else { (arg >> 32) as u32 }
            }
            o => panic!("load of offset {o}"),
        }
    };
    let (mut pc, mut acc) = (0usize, 0u32);
    loop {
        let i = program[pc];
        pc += 1;
        match i.code {
            LD_W_ABS => acc = word(i.k),
            RET_K => return i.k,
            JA => pc += i.k as usize,
            JEQ_K | JGE_K | JSET_K => {
                let taken = match i.code {
                    JEQ_K => acc == i.k,
                    JGE_K => acc >= i.k,
                    _ => acc & i.k != 0,
                };
                pc += if taken { i.jt } else { i.jf } as usize;
            }
            other => panic!("opcode {other:#x}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn search_finds_every_listed_number_and_defaults_the_rest() {
        let rules: Vec<(u32, Decision)> =
            (0..400).filter(|n| n % 3 != 0).map(|n| (n, Decision::Return(if n % 2 == 0 { RET_ALLOW } else { ret_errno(n as i32) }))).collect();
        let program = build(&rules, ret_errno(libc::ENOSYS), RET_TRAP).unwrap();
        for nr in 0..1024u32 {
            let want = if nr < 400 && nr % 3 != 0 { if nr % 2 == 0 { RET_ALLOW } else { ret_errno(nr as i32) } } else { ret_errno(libc::ENOSYS) };
            assert_eq!(run(&program, AUDIT_ARCH, nr, [0; 6]), want, "nr {nr}");
        }
        assert_eq!(run(&program, 0x4000_0003, 1, [0; 6]), RET_KILL_PROCESS, "another architecture");
        #[cfg(target_arch = "x86_64")]
        assert_eq!(run(&program, AUDIT_ARCH, X32_SYSCALL_BIT | 1, [0; 6]), RET_KILL_PROCESS, "x32");
    }

    #[test]
    fn argument_rules() {
        let rules = vec![
            (10, Decision::ViolationIfAnyBit { arg: 0, mask: 0x1000_0000 }),
            (20, Decision::ViolationIfOneOf { arg: 1, values: vec![7, 9] }),
            (30, Decision::ErrnoIfNonZero { args: vec![0, 1], errno: libc::EPERM }),
        ];
        let p = build(&rules, ret_errno(libc::ENOSYS), RET_USER_NOTIF).unwrap();
        assert_eq!(run(&p, AUDIT_ARCH, 10, [0x1000_0011, 0, 0, 0, 0, 0]), RET_USER_NOTIF);
        assert_eq!(run(&p, AUDIT_ARCH, 10, [0x11, 0, 0, 0, 0, 0]), RET_ALLOW);
        assert_eq!(run(&p, AUDIT_ARCH, 20, [0, 9, 0, 0, 0, 0]), RET_USER_NOTIF);
        assert_eq!(run(&p, AUDIT_ARCH, 20, [0, (1 << 32) | 9, 0, 0, 0, 0]), RET_USER_NOTIF, "low 32 bits compared");
        assert_eq!(run(&p, AUDIT_ARCH, 20, [0, 8, 0, 0, 0, 0]), RET_ALLOW);
        assert_eq!(run(&p, AUDIT_ARCH, 30, [0, 0, 5, 0, 0, 0]), RET_ALLOW);
        assert_eq!(run(&p, AUDIT_ARCH, 30, [0, 1 << 40, 0, 0, 0, 0]), ret_errno(libc::EPERM), "high 32 bits compared");
        assert_eq!(run(&p, AUDIT_ARCH, 30, [3, 0, 0, 0, 0, 0]), ret_errno(libc::EPERM));
    }

    #[test]
    fn duplicates_are_refused() {
        let rules = vec![(1, Decision::Return(RET_ALLOW)), (1, Decision::Return(RET_TRAP))];
        assert!(build(&rules, ret_errno(libc::ENOSYS), RET_TRAP).is_err());
    }
}
