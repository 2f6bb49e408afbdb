//! tame's figures as Prometheus text exposition (format 0.0.4): the result documents tame
//! writes (`tame export prometheus`, for node_exporter's textfile collector) and the live
//! figures of `tame serve` (`tame serve --metrics`, an HTTP GET /metrics of its own).
//! Every series is listed in docs/metrics.md.
//!
//! - [`writer`]: the strict writer of the format;
//! - [`input`]: which documents are read (recognised by their own schema fields);
//! - [`bench`], [`check`], [`status`], [`reserve`], [`assess`]: one document kind each;
//! - [`live`]: the server's snapshot as series; [`http`]: the bounded GET responder.

pub mod assess;
pub mod bench;
pub mod check;
pub mod cpu_tally;
pub mod guard;
pub mod http;
pub mod input;
pub mod live;
pub mod names;
pub mod reserve;
pub mod status;
pub mod writer;

use std::path::PathBuf;

pub use writer::{Exposition, CONTENT_TYPE};

/// Why an export could not be made.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The inputs must change (what, why, what to do): exit 2, nothing written.
    #[error("{0}")]
    Input(String),
    /// A fault of tame's: a series it built that the format cannot carry.
    #[error("cannot write the exposition: {0}")]
    Format(#[from] writer::WriteError),
}

impl tame_host::error::LayerError for Error {
    fn is_bad_input(&self) -> bool {
        matches!(self, Error::Input(_))
    }
    /// The exposition's refusal is named in the message.
    fn names_its_cause(&self) -> bool {
        matches!(self, Error::Format(_))
    }
}

/// What to export and how to label it.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// The `config` label of bench results in place of their partition's name (`shared`
    /// outside one): to tell apart results of one configuration exported together.
    pub config: Option<String>,
}

/// The exposition of every document in `paths`, refused (nothing returned) when one is not
/// a document this tame exports, or when two give the same series.
pub fn export(paths: &[PathBuf], options: &Options) -> Result<String, Error> {
    if paths.is_empty() {
        return Err(Error::Input(
            "no input — name one or more results: tame export prometheus RESULT.json…".into(),
        ));
    }
    let inputs = paths
        .iter()
        .map(|p| input::read(p))
        .collect::<Result<Vec<_>, _>>()?;
    let mut e = Exposition::new();
    for i in &inputs {
        for (n, doc) in i.docs.iter().enumerate() {
            add(&mut e, doc, options).map_err(|err| clash(err, i, n, options))?;
        }
    }
    Ok(e.render())
}

/// What a writer error while adding `input.docs[n]` means. Series that collide come from
/// what the files hold (a crafted or edited file can name a metric after another family,
/// or repeat a group): bad input, naming the file. Anything else is tame's own fault.
fn clash(err: writer::WriteError, input: &input::Input, n: usize, options: &Options) -> Error {
    let file = &input.file;
    match err {
        writer::WriteError::Duplicate(series) => {
            // Alone, does the file give it twice itself? (Only looked at on this error.)
            let mut alone = Exposition::new();
            let itself = input.docs[..=n]
                .iter()
                .any(|d| add(&mut alone, d, options).is_err());
            Error::Input(if itself {
                format!(
                    "{file} gives the series {series} twice (two groups of one label and CPU, or two rows of one study): it is not as tame writes it — write it again with tame"
                )
            } else {
                format!(
                    "{file}: the series {series} is given by an earlier input too — two results of one bench, configuration and load (or two checks, statuses, studies) cannot share a file: export them to files of their own, or tell bench results apart with --config NAME"
                )
            })
        }
        writer::WriteError::KindClash {
            name,
            first,
            second,
        } => Error::Input(format!(
            "{file}: its names give {name} as a {second}, but {name} is already a {first} (of this file or an earlier one): a bench or metric named after another family is not as tame writes results — write it again with tame, or export it to a file of its own"
        )),
        other => Error::Format(other),
    }
}

/// Add one recognised document.
pub fn add(
    e: &mut Exposition,
    doc: &input::Export,
    options: &Options,
) -> Result<(), writer::WriteError> {
    match doc {
        input::Export::Bench { compared, step } => {
            let base = options.config.clone().unwrap_or_else(|| {
                compared
                    .result
                    .partition
                    .clone()
                    .unwrap_or_else(|| "shared".into())
            });
            let config = match step {
                Some(s) => format!("{base} {s}"),
                None => base,
            };
            bench::add(e, compared, &config)
        }
        input::Export::Check(r) => check::add(e, r, "as_found"),
        input::Export::Status(s) => status::add(e, s),
        input::Export::Assess(r) => assess::add(e, r),
        input::Export::Reserve(r) => reserve::add(e, r),
    }
}
