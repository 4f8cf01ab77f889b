//! What a replay produces: the re-read queries paired with the captured values and written to
//! the results file (`reread`), and the summary the CLI prints (`summary`).

pub(crate) mod reread;
pub mod summary;
