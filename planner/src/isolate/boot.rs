//! Boot-time isolation, printed for the user to apply (never applied by
//! pinplan): the kernel arguments, with the `grubby` and `/etc/default/grub`
//! ways to set them, and tuned's `cpu-partitioning` profile variables. CPU
//! lists are in the kernel's cpulist syntax.

use super::Target;

/// The kernel arguments: VM CPUs isolated from the scheduler's domains and
/// managed IRQs, without the tick and RCU callbacks; IRQs on the
/// housekeeping CPUs.
pub fn kernel_args(target: &Target) -> String {
    let vm = &target.vm_cpus;
    format!(
        "isolcpus=managed_irq,domain,{vm} nohz_full={vm} rcu_nocbs={vm} irqaffinity={}",
        target.housekeeping
    )
}

/// `--emit kernel-args`: the arguments and how to set them.
pub fn kernel_args_text(target: &Target) -> String {
    let args = kernel_args(target);
    format!(
        "# Boot-time isolation of the VM CPUs {vm} (the host keeps {hk}).\n\
         # Replace any isolcpus=, nohz_full=, rcu_nocbs= or irqaffinity= already set, then reboot.\n\
         {args}\n\
         #\n\
         # Fedora, RHEL, CentOS (grubby):\n\
         #   grubby --update-kernel=ALL --args=\"{args}\"\n\
         # Debian, Ubuntu: add them to GRUB_CMDLINE_LINUX in /etc/default/grub, then:\n\
         #   update-grub\n\
         # (other GRUB systems: grub2-mkconfig -o /boot/grub2/grub.cfg)\n",
        vm = target.vm_cpus,
        hk = target.housekeeping,
    )
}

/// `--emit tuned`: `/etc/tuned/cpu-partitioning-variables.conf` and how to
/// switch the profile on.
pub fn tuned_text(target: &Target) -> String {
    format!(
        "# /etc/tuned/cpu-partitioning-variables.conf — written by pinplan isolate --emit tuned\n\
         # The VM CPUs (the host keeps {hk}). Then: dnf install tuned-profiles-cpu-partitioning\n\
         # (or apt install tuned), tuned-adm profile cpu-partitioning, and reboot: the profile\n\
         # sets isolcpus=, nohz_full= and rcu_nocbs= for these CPUs.\n\
         isolated_cores={vm}\n",
        vm = target.vm_cpus,
        hk = target.housekeeping,
    )
}
