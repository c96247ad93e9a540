//! summary.json: its types ([`schema`]), the summary of every section computed from an
//! [`Analysis`](crate::model::Analysis) ([`summarize`]), and what holds the job back, ranked
//! from those figures ([`culprits`]).

pub mod culprits;
pub mod schema;
pub mod summarize;
