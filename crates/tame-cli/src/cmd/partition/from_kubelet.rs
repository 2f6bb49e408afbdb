//! `tame plan SPEC --from-kubelet FILE`: a node's kubelet config file against the
//! KubeletConfiguration tame would set for the spec. Exit 0 when every field matches,
//! 1 when one differs or is missing, 2 on bad input (unreadable or malformed file, a
//! spec that cannot be applied on this host).

use std::fmt::Write as _;
use std::path::Path;

use tame_host::HostModel;
use tame_kube::{inline, Comparison, Outcome};

use crate::cmd::export::kubernetes::{notes, PLAN_WARNS};
use crate::error::EXIT_FAILED;
use crate::output::{print_json, print_out};
use crate::{bad_input, Context};

pub fn run(
    ctx: &Context,
    spec_path: &Path,
    spec: &tame_partition::Spec,
    file: &Path,
    json: bool,
) -> anyhow::Result<i32> {
    let text = std::fs::read_to_string(file).map_err(|e| {
        bad_input(format!(
            "cannot read the kubelet config {}: {e} — give the node's kubelet config file (often /var/lib/kubelet/config.yaml)",
            file.display()
        ))
    })?;
    let node = tame_kube::parse_node_config(&file.display().to_string(), &text)
        .map_err(|e| bad_input(e.to_string()))?;
    let wanted = tame_kube::kubelet_for(spec, &HostModel::read(&ctx.root))?;
    let comparison = tame_kube::compare(&wanted, &node);
    // As `tame export kubelet` does: the plan's warnings hold for the node too.
    eprint!(
        "{}",
        notes("plan --from-kubelet", PLAN_WARNS, &wanted.plan_warnings)
    );
    if json {
        print_json(&comparison)?;
    } else {
        print_out(&view(spec_path, file, &comparison))?;
    }
    Ok(if comparison.matches() { 0 } else { EXIT_FAILED })
}

/// One line per field (matched, differs with the node's and tame's value and why, missing),
/// then the verdict.
fn view(spec: &Path, file: &Path, c: &Comparison) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "Kubelet config {} against what tame sets for {}:",
        file.display(),
        spec.display()
    );
    for check in &c.checks {
        let want = inline(&check.want);
        let _ = match &check.outcome {
            Outcome::Matched => writeln!(o, "  matched  {}: {want}", check.field),
            Outcome::Differs { node } => writeln!(
                o,
                "  differs  {}: the node has {}, tame sets {want} — {}",
                check.field,
                inline(node),
                check.why
            ),
            Outcome::Missing => writeln!(
                o,
                "  missing  {}: tame sets {want} — {}",
                check.field, check.why
            ),
        };
        if let Some(note) = &check.note {
            let _ = writeln!(o, "           {note}");
        }
    }
    let matched = c.count(|o| matches!(o, Outcome::Matched));
    let differs = c.count(|o| matches!(o, Outcome::Differs { .. }));
    let missing = c.count(|o| matches!(o, Outcome::Missing));
    let _ = writeln!(
        o,
        "\n{matched} matched, {differs} differ, {missing} missing: {}",
        if c.matches() {
            "the node's kubelet realises the spec"
        } else {
            "the node's kubelet does not realise the spec (see `tame export kubelet` for the whole set)"
        }
    );
    o
}
