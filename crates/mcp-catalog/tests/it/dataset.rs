//! Search quality on the bfcl tool-search dataset, kept in the repository at `datasets/bfcl`
//! (Apache-2.0; see `datasets/README.md`).

use std::path::PathBuf;

use mcp_catalog::eval::{evaluate, index_tools, load_queries, load_tools};
use mcp_catalog::search::SearchIndex;

fn dataset() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../datasets/bfcl")
}

#[test]
fn bfcl_ranking_meets_the_targets() {
    let dir = dataset();
    let tools = load_tools(&dir.join("tools.jsonl")).unwrap();
    let queries = load_queries(&dir.join("queries.jsonl")).unwrap();
    let mut index = SearchIndex::default();
    index_tools(&mut index, &tools);
    let report = evaluate(&index, &queries);
    println!("{report}");
    assert_eq!(report.tools, 1437);
    assert_eq!(report.queries, 2501);
    assert!(report.hit[1] >= 0.88, "hit@5 {:.4} < 0.88", report.hit[1]);
    assert!(report.mrr >= 0.77, "MRR {:.4} < 0.77", report.mrr);
}
