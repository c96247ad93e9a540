//! Direct driver launches (`cuLaunchKernel` and kin, as Triton's launcher makes them), recorded
//! from CUPTI's callbacks on just those calls instead of the DRIVER activity kind (which costs
//! time on every driver call). The record matches what CUPTI would have written: the callback's
//! correlation id is the one CUPTI gives the kernel, times are CUPTI's clock.

use crate::cupti::{CallbackData, API_ENTER, API_EXIT};
use crate::{control, tid, tracer, Msg};
use cuprof_core::decode::Resolve;
use cuprof_core::event::{ApiCall, ApiDomain, Event};
use cuprof_core::session::Input;
use std::sync::atomic::Ordering::Relaxed;

pub fn on_launch(site: u32, cbid: u32, d: &CallbackData) {
    if !control::collecting() {
        return;
    }
    let Some(t) = tracer() else { return };
    let now = t.cupti.timestamp();
    if site == API_ENTER {
        if !d.correlation_data.is_null() {
            // SAFETY: CUPTI's per-call u64 slot, valid during the callback.
            unsafe { *d.correlation_data = now };
        }
        return;
    }
    if site != API_EXIT {
        return;
    }
    let start = if d.correlation_data.is_null() {
        now
    } else {
        // SAFETY: as above; written by this call's enter callback.
        unsafe { *d.correlation_data }
    };
    let name = match t.names.lock() {
        Ok(mut n) => n.api_name(ApiDomain::Driver, cbid),
        Err(_) => return,
    };
    let call = ApiCall {
        domain: ApiDomain::Driver,
        cbid,
        name,
        start: if start == 0 { now } else { start },
        end: now,
        pid: t.pid,
        tid: tid(),
        correlation: d.correlation_id,
        return_value: 0,
    };
    let msg = Msg::Input(Input::Events(vec![Event::Api(call)]));
    if t.tx.try_send(msg).is_err() {
        t.counters.dropped_channel.fetch_add(1, Relaxed);
    }
}
