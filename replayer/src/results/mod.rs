//! What a replay produces: the re-read queries paired with the captured values and written to
//! the results file (`reread`), with how the trace began each (`begins`), and the summary the CLI
//! prints (`summary`).

pub(crate) mod begins;
pub(crate) mod reread;
pub mod summary;
