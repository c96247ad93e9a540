//! Reading back the Parquet files `cuprof export` writes, column by column, for the tests.
#![allow(dead_code)]

use std::fs::File;
use std::path::Path;
use std::process::Command;

use arrow_array::{Array, BooleanArray, Float64Array, Int64Array, RecordBatch, StringArray};
use arrow_schema::{DataType, SchemaRef};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use serde::de::DeserializeOwned;

/// A table file's rows, all batches joined.
pub struct Rows(Vec<RecordBatch>, SchemaRef, usize);

impl Rows {
    pub fn read(path: &Path) -> Rows {
        let f = File::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let b = ParquetRecordBatchReaderBuilder::try_new(f).unwrap();
        let (schema, groups) = (b.schema().clone(), b.metadata().num_row_groups());
        let r = b.build().unwrap();
        Rows(r.map(|b| b.unwrap()).collect(), schema, groups)
    }

    /// The file's row groups.
    pub fn row_groups(&self) -> usize {
        self.2
    }

    /// Every column's values as text (floats by their bits), by name, in the file's order:
    /// equal for two files of the same rows in the same order, however their groups are cut.
    pub fn columns(&self) -> Vec<(String, Vec<Option<String>>)> {
        let text = |v: Option<String>| v;
        self.1
            .fields()
            .iter()
            .map(|f| {
                let name = f.name();
                let values: Vec<Option<String>> = match f.data_type() {
                    DataType::Int64 => self
                        .ints(name)
                        .into_iter()
                        .map(|v| v.map(|i| i.to_string()))
                        .collect(),
                    DataType::Float64 => self
                        .floats(name)
                        .into_iter()
                        .map(|v| v.map(|x| format!("{:#x}", x.to_bits())))
                        .collect(),
                    DataType::Utf8 => self.texts(name).into_iter().map(text).collect(),
                    DataType::Boolean => self
                        .bools(name)
                        .into_iter()
                        .map(|v| v.map(|b| b.to_string()))
                        .collect(),
                    other => panic!("column {name}: unexpected type {other}"),
                };
                (name.clone(), values)
            })
            .collect()
    }

    pub fn len(&self) -> usize {
        self.0.iter().map(|b| b.num_rows()).sum()
    }

    pub fn ints(&self, col: &str) -> Vec<Option<i64>> {
        let mut v = Vec::new();
        for b in &self.0 {
            let a = b
                .column_by_name(col)
                .unwrap_or_else(|| panic!("no column {col}"));
            let a = a.as_any().downcast_ref::<Int64Array>().unwrap();
            v.extend((0..a.len()).map(|i| a.is_valid(i).then(|| a.value(i))));
        }
        v
    }

    pub fn int(&self, col: &str) -> Vec<i64> {
        self.ints(col).into_iter().map(|x| x.unwrap()).collect()
    }

    pub fn floats(&self, col: &str) -> Vec<Option<f64>> {
        let mut v = Vec::new();
        for b in &self.0 {
            let a = b.column_by_name(col).unwrap();
            let a = a.as_any().downcast_ref::<Float64Array>().unwrap();
            v.extend((0..a.len()).map(|i| a.is_valid(i).then(|| a.value(i))));
        }
        v
    }

    pub fn texts(&self, col: &str) -> Vec<Option<String>> {
        let mut v = Vec::new();
        for b in &self.0 {
            let a = b.column_by_name(col).unwrap();
            let a = a.as_any().downcast_ref::<StringArray>().unwrap();
            v.extend((0..a.len()).map(|i| a.is_valid(i).then(|| a.value(i).to_string())));
        }
        v
    }

    pub fn text(&self, col: &str) -> Vec<String> {
        self.texts(col).into_iter().map(|x| x.unwrap()).collect()
    }

    pub fn bools(&self, col: &str) -> Vec<Option<bool>> {
        let mut v = Vec::new();
        for b in &self.0 {
            let a = b.column_by_name(col).unwrap();
            let a = a.as_any().downcast_ref::<BooleanArray>().unwrap();
            v.extend((0..a.len()).map(|i| a.is_valid(i).then(|| a.value(i))));
        }
        v
    }
}

/// The SQL block that follows the first line of docs/tables.md starting with `lead`, with the
/// dataset's directory as `{d}`.
pub fn query_after(lead: &str) -> String {
    let doc =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/tables.md"))
            .unwrap();
    let from = doc
        .find(lead)
        .unwrap_or_else(|| panic!("docs/tables.md: no {lead:?}"));
    let block = &doc[from..];
    let start = block.find("```sql\n").expect("a SQL block") + "```sql\n".len();
    let len = block[start..].find("```").expect("the block ends");
    block[start..start + len].replace("DIR", "{d}")
}

/// The rows of `sql` over the dataset in `d`, run by DuckDB after docs/tables.md's views, as
/// JSON (integers as integers, floats as floats, nulls as nulls).
pub fn duckdb<T: DeserializeOwned>(d: &Path, sql: &str) -> T {
    let views = query_after("In DuckDB, a view per table first:");
    let script = r#"
import decimal, json, sys
try:
    import duckdb
except ImportError as e:
    print(f"missing: {e}", file=sys.stderr)
    sys.exit(3)
d, views, sql = sys.argv[1:]
con = duckdb.connect()
for v in views.format(d=d).split(";"):
    if v.strip():
        con.execute(v)
rows = con.execute(sql.format(d=d)).fetchall()
as_json = lambda x: int(x) if isinstance(x, decimal.Decimal) and x == int(x) else float(x)
print(json.dumps([list(r) for r in rows], default=as_json))
"#;
    let o = Command::new("python3")
        .args(["-c", script])
        .arg(d)
        .arg(&views)
        .arg(sql)
        .output()
        .expect("run python3");
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_ne!(
        o.status.code(),
        Some(3),
        "duckdb is not installed for python3 ({stderr}): run `bash scripts/test.sh`, which \
         installs scripts/python-requirements.txt into a virtual environment and puts it first \
         on PATH"
    );
    assert!(o.status.success(), "duckdb failed: {stderr}");
    serde_json::from_slice(&o.stdout).unwrap()
}
