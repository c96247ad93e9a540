//! Where each CUDA event was last recorded (CUPTI's CUDA_EVENT records), so that an Event Sync
//! or Stream Wait Event can name the stream and the cudaEventRecord call it waited on, as
//! Kineto's `wait_on_stream` and `wait_on_cuda_event_record_corr_id` do.

use crate::event::CudaEvent;
use crate::trace_writer::RecordedEvent;
use std::collections::HashMap;

/// (context, event id) -> the latest recording of that event. Two generations of at most
/// `bound` entries each: when the newer fills up it becomes the older and the older is
/// dropped, so the most recent `bound` recordings are always kept (a program records the same
/// few events again and again; a sync waits on a recent one).
#[derive(Debug)]
pub(super) struct CudaEvents {
    newer: HashMap<(u32, u32), RecordedEvent>,
    older: HashMap<(u32, u32), RecordedEvent>,
    bound: usize,
}

impl CudaEvents {
    pub(super) fn new(bound: usize) -> Self {
        CudaEvents {
            newer: HashMap::new(),
            older: HashMap::new(),
            bound,
        }
    }

    pub(super) fn recorded(&mut self, e: &CudaEvent) {
        if self.newer.len() >= self.bound {
            self.older = std::mem::take(&mut self.newer);
        }
        let at = RecordedEvent {
            stream: e.stream,
            correlation: e.correlation,
        };
        self.newer.insert((e.context, e.event_id), at);
    }

    pub(super) fn get(&self, context: u32, event_id: u32) -> Option<RecordedEvent> {
        let key = (context, event_id);
        self.newer
            .get(&key)
            .or_else(|| self.older.get(&key))
            .copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(event_id: u32, stream: u32, correlation: u32) -> CudaEvent {
        CudaEvent {
            correlation,
            context: 1,
            stream,
            event_id,
        }
    }

    #[test]
    fn the_latest_recording_of_an_event_wins_and_the_newest_stay_within_the_bound() {
        let mut m = CudaEvents::new(2);
        m.recorded(&record(1, 7, 10));
        m.recorded(&record(1, 9, 11));
        let at = |stream, correlation| {
            Some(RecordedEvent {
                stream,
                correlation,
            })
        };
        assert_eq!(m.get(1, 1), at(9, 11));
        assert_eq!(m.get(2, 1), None); // another context's event 1
        m.recorded(&record(2, 7, 12));
        m.recorded(&record(3, 7, 13)); // the newer generation was full: it becomes the older
        assert_eq!(
            (m.get(1, 1), m.get(1, 2), m.get(1, 3)),
            (at(9, 11), at(7, 12), at(7, 13))
        );
        m.recorded(&record(4, 7, 14));
        m.recorded(&record(5, 7, 15)); // events 1 and 2 go
        assert_eq!(
            (m.get(1, 1), m.get(1, 2), m.get(1, 3)),
            (None, None, at(7, 13))
        );
        assert_eq!(m.newer.len() + m.older.len(), 3);
    }
}
