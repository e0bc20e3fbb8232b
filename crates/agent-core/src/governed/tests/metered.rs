//! The metrics layer counted by a real Prometheus recorder (installed for the test's thread),
//! read back from its text rendering.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusRecorder};

use super::*;
use crate::telemetry::{self, MAX_TOOL_LABELS, OTHER};

fn recorder() -> PrometheusRecorder {
    PrometheusBuilder::new()
        .set_buckets_for_metric(
            Matcher::Full(telemetry::TOOL_CALL_DURATION.into()),
            telemetry::DURATION_BUCKETS,
        )
        .unwrap()
        .build_recorder()
}

/// The samples of `metric` in `text`: each one's labels and value.
fn samples(text: &str, metric: &str) -> Vec<(BTreeMap<String, String>, f64)> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|line| {
            let (series, value) = line.rsplit_once(' ')?;
            let (name, labels) = match series.split_once('{') {
                Some((name, rest)) => (name, rest.trim_end_matches('}')),
                None => (series, ""),
            };
            (name == metric).then(|| {
                let labels = labels
                    .split("\",")
                    .filter(|p| !p.is_empty())
                    .map(|pair| {
                        let (k, v) = pair.split_once('=').unwrap();
                        (k.to_owned(), v.trim_matches('"').to_owned())
                    })
                    .collect();
                (labels, value.parse().unwrap())
            })
        })
        .collect()
}

/// The value of `metric` whose labels are exactly `labels` (0 when there is none).
fn value(text: &str, metric: &str, labels: &[(&str, &str)]) -> f64 {
    let want: BTreeMap<String, String> = labels
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    samples(text, metric)
        .into_iter()
        .find(|(l, _)| *l == want)
        .map_or(0.0, |(_, v)| v)
}

#[tokio::test(start_paused = true)]
async fn each_call_is_counted_once_by_server_tool_and_outcome() {
    let recorder = recorder();
    let _local = metrics::set_default_local_recorder(&recorder);
    let governed = GovernedLayer::new()
        .identity_rules(IdentityRules::default().deny(Rule::new("acme/files", "rm")))
        .call_timeout(Duration::from_secs(30))
        .layer(Fake::new());
    for _ in 0..2 {
        governed
            .dispatch(call("files__read", json!({})))
            .await
            .unwrap();
    }
    governed
        .dispatch(via_call_tool("web__fetch", json!({})))
        .await
        .unwrap();
    governed
        .dispatch(call("files__fail", json!({"token": "t"})))
        .await
        .unwrap_err();
    denial(governed.dispatch(call("files__rm", json!({}))).await);
    governed
        .dispatch(call("no such tool", json!({})))
        .await
        .unwrap_err();
    let timed_out = governed.dispatch(call("files__slow", json!({}))).await;
    assert!(
        matches!(timed_out, Err(ToolError::Timeout { .. })),
        "{timed_out:?}"
    );
    let mut abandoned = Box::pin(governed.dispatch(call("files__slow", json!({}))));
    assert!(futures::poll!(&mut abandoned).is_pending());
    drop(abandoned);
    governed
        .dispatch(call("mcp_search_tools", json!({})))
        .await
        .unwrap();

    let text = recorder.handle().render();
    let calls = |server, tool, outcome| {
        value(
            &text,
            telemetry::TOOL_CALLS,
            &[("server", server), ("tool", tool), ("outcome", outcome)],
        )
    };
    assert_eq!(calls("files", "read", "ok"), 2.0, "{text}");
    assert_eq!(
        calls("web", "fetch", "ok"),
        1.0,
        "the real tool behind mcp_call_tool"
    );
    assert_eq!(calls("files", "fail", "tool_error"), 1.0);
    assert_eq!(calls("files", "rm", "denied"), 1.0);
    assert_eq!(
        calls("", "no_such_tool", "tool_error"),
        1.0,
        "the name asked, cleaned"
    );
    assert_eq!(calls("files", "slow", "timeout"), 1.0);
    assert_eq!(calls("files", "slow", "cancelled"), 1.0);
    assert_eq!(calls("", "mcp_search_tools", "ok"), 1.0);
    let total: f64 = samples(&text, telemetry::TOOL_CALLS)
        .iter()
        .map(|(_, v)| v)
        .sum();
    assert_eq!(total, 9.0, "each of the 9 calls once");
    // Timed: the calls that ran (not the refused one, nor the one that named no tool).
    let count = format!("{}_count", telemetry::TOOL_CALL_DURATION);
    assert_eq!(value(&text, &count, &[("server", "files")]), 5.0, "{text}");
    assert_eq!(value(&text, &count, &[("server", "web")]), 1.0);
    let sum = format!("{}_sum", telemetry::TOOL_CALL_DURATION);
    assert!(
        value(&text, &sum, &[("server", "files")]) >= 30.0,
        "the timed-out call took its 30 s: {text}"
    );
}

#[tokio::test]
async fn fifty_thousand_hostile_tool_names_make_a_bounded_number_of_series() {
    let recorder = recorder();
    let _local = metrics::set_default_local_recorder(&recorder);
    let governed = GovernedLayer::new().layer(Fake::new());
    for i in 0..50_000 {
        let name = format!("files__{i}{}", "\"}\n".repeat(i % 3));
        governed.dispatch(call(&name, json!({}))).await.unwrap_err();
    }
    let text = recorder.handle().render();
    let series = samples(&text, telemetry::TOOL_CALLS);
    assert!(
        series.len() <= MAX_TOOL_LABELS + 1,
        "{} series for 50,000 names",
        series.len()
    );
    let total: f64 = series.iter().map(|(_, v)| v).sum();
    assert_eq!(total, 50_000.0, "every call counted");
    let other = value(
        &text,
        telemetry::TOOL_CALLS,
        &[("server", ""), ("tool", OTHER), ("outcome", "tool_error")],
    );
    assert!(other >= (50_000 - MAX_TOOL_LABELS) as f64, "{other}");
    assert!(
        series.iter().all(
            |(labels, _)| labels["tool"].len() <= telemetry::MAX_LABEL_BYTES
                && !labels["tool"].contains(['"', '}', '\n'])
        ),
        "cleaned and cut"
    );
}

#[tokio::test]
async fn a_call_dropped_before_it_is_polled_runs_no_policy_and_is_counted_nowhere() {
    struct Counting(AtomicUsize);
    impl ToolPolicy for Counting {
        fn before_call(&self, _: &CallInfo<'_>) -> PolicyDecision {
            self.0.fetch_add(1, Ordering::SeqCst);
            PolicyDecision::Allow
        }
    }
    let recorder = recorder();
    let _local = metrics::set_default_local_recorder(&recorder);
    let policy = Arc::new(Counting(AtomicUsize::new(0)));
    let governed = GovernedLayer::new()
        .policy(policy.clone())
        .layer(Fake::new());

    drop(governed.dispatch(call("files__read", json!({}))));
    assert_eq!(
        policy.0.load(Ordering::SeqCst),
        0,
        "no policy before the first poll"
    );
    assert!(
        samples(&recorder.handle().render(), telemetry::TOOL_CALLS).is_empty(),
        "nothing counted"
    );

    governed
        .dispatch(call("files__read", json!({})))
        .await
        .unwrap();
    assert_eq!(policy.0.load(Ordering::SeqCst), 1);
    let text = recorder.handle().render();
    let ok = [("server", "files"), ("tool", "read"), ("outcome", "ok")];
    assert_eq!(value(&text, telemetry::TOOL_CALLS, &ok), 1.0, "{text}");
}
