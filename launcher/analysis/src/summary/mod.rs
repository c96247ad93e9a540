//! summary.json: its types ([`schema`]) and the summary of every section computed from an
//! [`Analysis`](crate::model::Analysis) ([`summarize`]).

pub mod schema;
pub mod summarize;
