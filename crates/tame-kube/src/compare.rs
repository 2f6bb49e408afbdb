//! A node's kubelet config file (YAML or JSON) against the KubeletConfiguration fields
//! tame would set: each field matched, differing (with tame's value and why) or missing.

use serde::Serialize;
use serde_norway::Value;
use tame_host::CpuList;

use crate::document::{lookup, yaml, Check, Export, Field};
use crate::kubelet::{API_VERSION, DEFAULT_EVICTION_MI, KIND};

/// Version of the JSON shape of [`Comparison`].
impl tame_host::Document for Comparison {
    const SCHEMA: tame_host::Schema = tame_host::schema!(Tagged "tame.kubelet.compare", 1);
}

/// A kubelet config file that cannot be compared: what is wrong and what to do.
#[derive(Debug, thiserror::Error)]
#[error("{origin}: {message}")]
pub struct NodeConfigError {
    pub origin: String,
    pub message: String,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum Outcome {
    Matched,
    Differs { node: Value },
    Missing,
}

/// One field tame sets, as the node has it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Checked {
    pub field: String,
    pub want: Value,
    pub why: String,
    #[serde(flatten)]
    pub outcome: Outcome,
    /// Why a differing value is wrong beyond "not tame's" (the kubelet refuses it, …).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Comparison {
    pub schema: &'static str,
    pub checks: Vec<Checked>,
}

impl Comparison {
    /// Whether the node realises what tame would set.
    pub fn matches(&self) -> bool {
        self.checks.iter().all(|c| c.outcome == Outcome::Matched)
    }

    pub fn count(&self, pick: fn(&Outcome) -> bool) -> usize {
        self.checks.iter().filter(|c| pick(&c.outcome)).count()
    }
}

/// Read a kubelet config file: JSON when it starts with `{`, else YAML. An OpenShift
/// `KubeletConfig` object is read through its `spec.kubeletConfig`.
pub fn parse_node_config(origin: &str, text: &str) -> Result<Value, NodeConfigError> {
    let err = |message: String| NodeConfigError {
        origin: origin.to_string(),
        message,
    };
    let doc: Value = if text.trim_start().starts_with('{') {
        serde_json::from_str(text).map_err(|e| {
            err(format!(
                "not valid JSON at line {}, column {}: {e} — give the node's kubelet config file (/var/lib/kubelet/config.yaml)",
                e.line(),
                e.column()
            ))
        })?
    } else {
        serde_norway::from_str(text).map_err(|e| {
            let at = e
                .location()
                .map(|l| format!(" at line {}, column {}", l.line(), l.column()))
                .unwrap_or_default();
            err(format!(
                "not valid YAML{at}: {e} — give the node's kubelet config file (/var/lib/kubelet/config.yaml)"
            ))
        })?
    };
    let mut doc = doc;
    // `<<: *anchor` merge keys are YAML 1.1, which the kubelet's YAML reader (sigs.k8s.io/yaml)
    // applies: a field set through one is set.
    doc.apply_merge().map_err(|e| {
        err(format!(
            "has a YAML merge key (<<) that cannot be applied: {e} — give the node's kubelet config file"
        ))
    })?;
    // The kubelet's /configz endpoint wraps its config in one key.
    if let Some(inner) = configz_inner(&doc) {
        doc = inner;
    }
    if !doc.is_mapping() {
        return Err(err(
            "is not a KubeletConfiguration: the document is not a map of fields — give the node's kubelet config file".into(),
        ));
    }
    let text_of = |key: &str| doc.get(key).and_then(Value::as_str).map(str::to_string);
    match text_of("kind").as_deref() {
        None | Some(KIND) => {}
        Some("KubeletConfig") => {
            return match doc.get("spec").and_then(|s| s.get("kubeletConfig")) {
                Some(inner) if inner.is_mapping() => Ok(inner.clone()),
                _ => Err(err("is an OpenShift KubeletConfig without spec.kubeletConfig — give the node's kubelet config file".into())),
            };
        }
        Some(other) => {
            return Err(err(format!(
                "is a {other}, not a {KIND} — give the node's kubelet config file (/var/lib/kubelet/config.yaml)"
            )))
        }
    }
    if let Some(v) = text_of("apiVersion") {
        if !v.starts_with("kubelet.config.k8s.io/") {
            return Err(err(format!(
                "has apiVersion {v:?}, not {API_VERSION} — give the node's kubelet config file"
            )));
        }
    }
    Ok(doc)
}

/// The config inside `{"kubeletconfig": {…}}`, the shape of the kubelet's /configz endpoint
/// (`kubectl get --raw /api/v1/nodes/NODE/proxy/configz`), when that key is the only one.
fn configz_inner(doc: &Value) -> Option<Value> {
    let map = doc.as_mapping()?;
    let inner = map.get("kubeletconfig").filter(|v| v.is_mapping())?;
    (map.len() == 1).then(|| inner.clone())
}

/// Compare the node's config (from [`parse_node_config`]) with tame's kubelet export.
pub fn compare(wanted: &Export, node: &Value) -> Comparison {
    let mut checks: Vec<Checked> = wanted
        .fields
        .iter()
        .filter(|f| f.check != Check::Sizing)
        .map(|f| check_field(f, lookup(node, &f.path)))
        .collect();
    if let Some(c) = checks.iter_mut().find(|c| c.field == "reservedMemory") {
        if c.outcome == Outcome::Matched {
            match memory_total(node) {
                Total::Equal => {}
                Total::Unequal(problem) => {
                    c.outcome = Outcome::Differs {
                        node: lookup(node, &["reservedMemory".into()])
                            .cloned()
                            .unwrap_or(Value::Null),
                    };
                    c.note = Some(problem);
                }
                Total::Unchecked(why) => {
                    c.note = Some(format!(
                        "cannot check that reservedMemory adds up to kubeReserved + systemReserved + evictionHard memory.available: {why}"
                    ))
                }
            }
        }
    }
    Comparison {
        schema: <Comparison as tame_host::Document>::SCHEMA.tag,
        checks,
    }
}

fn check_field(f: &Field, have: Option<&Value>) -> Checked {
    let (outcome, note) = match have {
        None | Some(Value::Null) => (Outcome::Missing, None),
        Some(have) => {
            let (same, note) = same(f, have);
            if same {
                (Outcome::Matched, None)
            } else {
                (Outcome::Differs { node: have.clone() }, note)
            }
        }
    };
    Checked {
        field: f.dotted(),
        want: f.value.clone(),
        why: f.why.clone(),
        outcome,
        note,
    }
}

/// Whether the node's value is tame's, and a note where it is unusable as written.
fn same(f: &Field, have: &Value) -> (bool, Option<String>) {
    match f.check {
        Check::Text | Check::Sizing => match have.as_str() {
            Some(s) => (Some(s) == f.value.as_str(), None),
            None => (
                false,
                Some("not a string: the kubelet reads this field as a string".into()),
            ),
        },
        // The node's value as the kubelet reads it (strictly); tame's own in its format.
        Check::CpuList => match have.as_str().map(crate::cpuset::parse) {
            Some(Ok(list)) => (
                f.value.as_str().and_then(|w| CpuList::parse(w).ok()) == Some(list),
                None,
            ),
            Some(Err(why)) => (
                false,
                Some(format!("the kubelet cannot read this value: {why}")),
            ),
            None => (
                false,
                Some("not a string: the kubelet reads a CPU list as a string".into()),
            ),
        },
        Check::NumaNodes => match (numa_nodes(have), numa_nodes(&f.value)) {
            (Some(node), Some(want)) => (node == want, None),
            _ => (
                false,
                Some("not a list of {numaNode, limits} entries".into()),
            ),
        },
    }
}

/// The NUMA nodes that carry a memory reservation, from a reservedMemory list; `None`
/// when an entry lacks its node number or limits.
fn numa_nodes(list: &Value) -> Option<CpuList> {
    list.as_sequence()?
        .iter()
        .filter_map(|e| {
            let node = e
                .get("numaNode")
                .and_then(Value::as_u64)
                .and_then(|n| u32::try_from(n).ok());
            let limits = e.get("limits").filter(|l| l.is_mapping());
            match (node, limits) {
                // An entry with only huge pages is valid but carries no memory.
                (Some(node), Some(limits)) => limits.get("memory").map(|_| Some(node)),
                _ => Some(None),
            }
        })
        .collect()
}

/// Whether reservedMemory adds up as the static memory manager requires.
#[derive(Debug, PartialEq)]
enum Total {
    Equal,
    /// It does not: the kubelet would refuse to start (the note says by how much).
    Unequal(String),
    /// An amount is a percentage, unreadable, or the sum is beyond any machine's memory
    /// (a crafted file): nothing to say about the total, and why.
    Unchecked(String),
}

/// The kubelet refuses to start with the static memory manager unless reservedMemory adds
/// up to kubeReserved + systemReserved + the hard eviction threshold for memory.available.
fn memory_total(node: &Value) -> Total {
    let get = |path: &[&str]| {
        let p: Vec<String> = path.iter().map(|s| s.to_string()).collect();
        lookup(node, &p).cloned()
    };
    let amount = |name: &str, v: Option<Value>| -> Result<u128, String> {
        match v {
            None => Ok(0),
            Some(v) => {
                let text = v
                    .as_str()
                    .map(str::to_string)
                    .unwrap_or_else(|| yaml(&v).trim().to_string());
                crate::quantity::bytes(&text)
                    .ok_or_else(|| format!("{name} is {text:?}, not an amount of bytes"))
            }
        }
    };
    // The kubelet's default thresholds apply only where evictionHard is not set at all,
    // or mergeDefaultEvictionSettings fills the signals it leaves out; otherwise a
    // signal evictionHard does not name has none (memory.available: 0).
    let defaults = matches!(get(&["evictionHard"]), None | Some(Value::Null))
        || get(&["mergeDefaultEvictionSettings"]).and_then(|v| v.as_bool()) == Some(true);
    let eviction = match get(&["evictionHard", "memory.available"]) {
        None if defaults => Ok(u128::from(DEFAULT_EVICTION_MI) << 20),
        None => Ok(0),
        v => amount("evictionHard memory.available", v),
    };
    let parts = [
        amount("kubeReserved.memory", get(&["kubeReserved", "memory"])),
        amount("systemReserved.memory", get(&["systemReserved", "memory"])),
        eviction,
    ];
    let expected = match sum(parts) {
        Ok(total) => total,
        Err(why) => return Total::Unchecked(why),
    };
    let Some(entries) = node.get("reservedMemory").and_then(Value::as_sequence) else {
        return Total::Unchecked("reservedMemory is not a list".into());
    };
    // An entry may reserve only huge pages (limits: {hugepages-1Gi: …}): no memory to add.
    let memory = entries
        .iter()
        .filter_map(|e| e.get("limits").and_then(|l| l.get("memory")));
    let reserved = sum(memory.map(|m| {
        let text = m
            .as_str()
            .map(str::to_string)
            .unwrap_or_else(|| yaml(m).trim().to_string());
        crate::quantity::bytes(&text).ok_or_else(|| {
            format!("reservedMemory limits.memory {text:?} is not an amount of bytes")
        })
    }));
    let reserved = match reserved {
        Ok(total) => total,
        Err(why) => return Total::Unchecked(why),
    };
    if reserved == expected {
        Total::Equal
    } else {
        Total::Unequal(format!(
            "reservedMemory adds up to {} MiB but kubeReserved + systemReserved + evictionHard memory.available is {} MiB: the kubelet refuses to start with the static memory manager until they are equal",
            reserved >> 20,
            expected >> 20
        ))
    }
}

/// The sum of amounts, or why there is none: the first unreadable amount, or an overflow
/// (only a crafted file reaches 2^128 bytes; it must not panic the comparison).
fn sum<E: Into<String>>(
    amounts: impl IntoIterator<Item = Result<u128, E>>,
) -> Result<u128, String> {
    amounts.into_iter().try_fold(0u128, |total, a| {
        total
            .checked_add(a.map_err(Into::into)?)
            .ok_or_else(|| "the amounts add up to more than 2^128 bytes".to_string())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(path: &str, value: Value, check: Check) -> Field {
        let path: Vec<&str> = path.split('.').collect();
        Field::new(&path, value, "why").checked(check)
    }

    fn text<'a>(doc: &'a Value, key: &str) -> Option<&'a str> {
        doc.get(key).and_then(Value::as_str)
    }

    fn export(fields: Vec<Field>) -> Export {
        Export {
            api_version: API_VERSION,
            kind: KIND,
            name: None,
            fields,
            not_expressed: vec![],
            plan_warnings: vec![],
        }
    }

    #[test]
    fn cpu_lists_compare_as_sets_and_text_exactly() {
        let e = export(vec![
            field("cpuManagerPolicy", "static".into(), Check::Text),
            field("reservedSystemCPUs", "0-1".into(), Check::CpuList),
            field(
                "topologyManagerPolicy",
                "single-numa-node".into(),
                Check::Text,
            ),
        ]);
        let node = parse_node_config(
            "k.yaml",
            "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\ncpuManagerPolicy: Static\nreservedSystemCPUs: \"0,1\"\n",
        )
        .unwrap();
        let c = compare(&e, &node);
        let outcomes: Vec<&Outcome> = c.checks.iter().map(|c| &c.outcome).collect();
        assert_eq!(
            outcomes,
            vec![
                &Outcome::Differs {
                    node: "Static".into()
                },
                &Outcome::Matched,
                &Outcome::Missing
            ]
        );
        assert!(!c.matches());
        // The kernel's spellings that the kubelet's parser refuses differ, with why.
        for bad in ["0, 1", "0-1:1/1"] {
            let node = parse_node_config("k", &format!("reservedSystemCPUs: \"{bad}\"\n")).unwrap();
            let c = compare(&e, &node);
            assert!(
                matches!(c.checks[1].outcome, Outcome::Differs { .. }),
                "{bad}"
            );
            let note = c.checks[1].note.as_deref().unwrap();
            assert!(
                note.starts_with("the kubelet cannot read this value: "),
                "{note}"
            );
        }
    }

    #[test]
    fn json_files_and_openshift_kubelet_configs_read() {
        let doc = parse_node_config(
            "k.json",
            "{\"kind\": \"KubeletConfiguration\", \"cpuManagerPolicy\": \"static\"}",
        )
        .unwrap();
        assert_eq!(text(&doc, "cpuManagerPolicy"), Some("static"));
        let doc = parse_node_config(
            "kc.yaml",
            "apiVersion: machineconfiguration.openshift.io/v1\nkind: KubeletConfig\nspec:\n  kubeletConfig:\n    cpuManagerPolicy: static\n",
        )
        .unwrap();
        assert_eq!(text(&doc, "cpuManagerPolicy"), Some("static"));
    }

    #[test]
    fn configz_output_and_merge_keys_read() {
        let doc = parse_node_config(
            "configz.json",
            "{\"kubeletconfig\": {\"cpuManagerPolicy\": \"static\", \"kind\": \"KubeletConfiguration\"}}",
        )
        .unwrap();
        assert_eq!(text(&doc, "cpuManagerPolicy"), Some("static"));
        // Beside other keys it is just a field (and this is no KubeletConfiguration's).
        let doc =
            parse_node_config("k", "kubeletconfig: {a: 1}\ncpuManagerPolicy: none\n").unwrap();
        assert!(doc.get("kubeletconfig").is_some());
        let doc = parse_node_config(
            "k.yaml",
            "base: &base\n  cpuManagerPolicy: static\n  reservedSystemCPUs: \"0-1\"\n<<: *base\nreservedSystemCPUs: \"0\"\n",
        )
        .unwrap();
        assert_eq!(text(&doc, "cpuManagerPolicy"), Some("static"));
        // A key written beside the merge wins, as YAML's merge says.
        assert_eq!(text(&doc, "reservedSystemCPUs"), Some("0"));
        let e = parse_node_config("k.yaml", "<<: 3\n").unwrap_err();
        assert!(e.to_string().contains("merge key"), "{e}");
    }

    #[test]
    fn malformed_files_say_what_and_where() {
        let e = parse_node_config("k.yaml", "cpuManagerPolicy: [static\n").unwrap_err();
        assert!(
            e.to_string().starts_with("k.yaml: not valid YAML at line"),
            "{e}"
        );
        let e = parse_node_config("k.json", "{\"a\": }").unwrap_err();
        assert!(e.to_string().contains("not valid JSON at line 1"), "{e}");
        let e = parse_node_config("k.yaml", "- a\n- b\n").unwrap_err();
        assert!(e.to_string().contains("not a map of fields"), "{e}");
        let e = parse_node_config("p.yaml", "kind: Pod\n").unwrap_err();
        assert!(
            e.to_string()
                .contains("is a Pod, not a KubeletConfiguration"),
            "{e}"
        );
        let e =
            parse_node_config("p.yaml", "apiVersion: v1\ncpuManagerPolicy: static\n").unwrap_err();
        assert!(e.to_string().contains("apiVersion \"v1\""), "{e}");
    }

    #[test]
    fn reserved_memory_compares_nodes_and_checks_the_total() {
        let want: Value =
            serde_norway::from_str("- numaNode: 0\n  limits: {memory: 1124Mi}\n").unwrap();
        let e = export(vec![field("reservedMemory", want, Check::NumaNodes)]);
        let ok = "reservedMemory:\n- numaNode: 0\n  limits: {memory: 1124Mi}\nkubeReserved: {memory: 512Mi}\nsystemReserved: {memory: 512Mi}\n";
        assert!(compare(&e, &parse_node_config("k", ok).unwrap()).matches());
        // Same node, but the total no longer adds up: the kubelet would refuse it.
        let short = ok.replace("1124Mi", "1Gi");
        let c = compare(&e, &parse_node_config("k", &short).unwrap());
        assert!(matches!(c.checks[0].outcome, Outcome::Differs { .. }));
        assert!(
            c.checks[0]
                .note
                .as_deref()
                .unwrap()
                .contains("adds up to 1024 MiB but"),
            "{:?}",
            c.checks[0].note
        );
        let other_node = ok.replace("numaNode: 0", "numaNode: 1");
        assert!(!compare(&e, &parse_node_config("k", &other_node).unwrap()).matches());
        // Sizing fields are not compared on their own.
        let e2 = export(vec![field(
            "kubeReserved.memory",
            "512Mi".into(),
            Check::Sizing,
        )]);
        assert!(compare(&e2, &parse_node_config("k", "{}").unwrap())
            .checks
            .is_empty());
    }

    #[test]
    fn totals_beyond_u128_cannot_be_checked_and_do_not_panic() {
        let want: Value =
            serde_norway::from_str("- numaNode: 0\n  limits: {memory: 1124Mi}\n").unwrap();
        let e = export(vec![field("reservedMemory", want, Check::NumaNodes)]);
        let max = u128::MAX.to_string();
        for (kube, system, reserved) in [
            (max.as_str(), "1", "1124Mi"),
            ("512Mi", "512Mi", max.as_str()),
        ] {
            let text = format!(
                "reservedMemory:\n- numaNode: 0\n  limits: {{memory: \"{reserved}\"}}\n- numaNode: 0\n  limits: {{memory: \"{reserved}\"}}\nkubeReserved: {{memory: \"{kube}\"}}\nsystemReserved: {{memory: \"{system}\"}}\n"
            );
            let c = compare(&e, &parse_node_config("k", &text).unwrap());
            assert_eq!(c.checks[0].outcome, Outcome::Matched);
            let note = c.checks[0].note.as_deref().unwrap();
            assert!(
                note.starts_with("cannot check that reservedMemory adds up")
                    && note.ends_with("more than 2^128 bytes"),
                "{note}"
            );
        }
        // A percentage is no amount either: said, not silently passed.
        let pct = "reservedMemory:\n- numaNode: 0\n  limits: {memory: 1124Mi}\nevictionHard: {memory.available: \"5%\"}\n";
        let c = compare(&e, &parse_node_config("k", pct).unwrap());
        assert!(
            c.checks[0]
                .note
                .as_deref()
                .unwrap()
                .ends_with("evictionHard memory.available is \"5%\", not an amount of bytes"),
            "{:?}",
            c.checks[0].note
        );
    }

    #[test]
    fn eviction_defaults_and_huge_page_only_entries() {
        let want: Value =
            serde_norway::from_str("- numaNode: 0\n  limits: {memory: 1124Mi}\n").unwrap();
        let e = export(vec![field("reservedMemory", want, Check::NumaNodes)]);
        let check =
            |text: &str| compare(&e, &parse_node_config("k", text).unwrap()).checks[0].clone();
        let base = "kubeReserved: {memory: 512Mi}\nsystemReserved: {memory: 512Mi}\n";
        let mem = |mi: u32| {
            format!("reservedMemory:\n- numaNode: 0\n  limits: {{memory: {mi}Mi}}\n- numaNode: 1\n  limits: {{hugepages-1Gi: 2Gi}}\n")
        };
        // No evictionHard: the default 100Mi counts; the huge-page-only entry is skipped.
        let c = check(&format!("{base}{}", mem(1124)));
        assert_eq!((c.outcome, c.note), (Outcome::Matched, None));
        // evictionHard naming another signal: memory.available has no threshold.
        let other = format!("{base}evictionHard: {{nodefs.available: 10%}}\n");
        let c = check(&format!("{other}{}", mem(1024)));
        assert_eq!((c.outcome, c.note), (Outcome::Matched, None));
        let c = check(&format!("{other}{}", mem(1124)));
        assert!(c.note.unwrap().contains("adds up to 1124 MiB but kubeReserved + systemReserved + evictionHard memory.available is 1024 MiB"));
        // …unless the defaults are merged in.
        let merged = format!("{other}mergeDefaultEvictionSettings: true\n{}", mem(1124));
        assert_eq!(check(&merged).outcome, Outcome::Matched);
        assert_eq!(check(&merged).note, None);
        // An entry without limits at all is malformed.
        for bad in [
            "- numaNode: 0",
            "- limits: {memory: 1Gi}",
            "- numaNode: x\n  limits: {memory: 1Gi}",
        ] {
            let c = check(&format!(
                "reservedMemory:\n- numaNode: 0\n  limits: {{memory: 1124Mi}}\n{bad}\n"
            ));
            assert!(
                c.note.unwrap_or_default().contains("not a list of"),
                "{bad}"
            );
        }
    }
}
