//! Reading back the Parquet files `cuprof export` writes, column by column, for the tests.
#![allow(dead_code)]

use std::fs::File;
use std::path::Path;

use arrow_array::{Array, BooleanArray, Float64Array, Int64Array, RecordBatch, StringArray};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

/// A table file's rows, all batches joined.
pub struct Rows(Vec<RecordBatch>);

impl Rows {
    pub fn read(path: &Path) -> Rows {
        let f = File::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let r = ParquetRecordBatchReaderBuilder::try_new(f)
            .unwrap()
            .build()
            .unwrap();
        Rows(r.map(|b| b.unwrap()).collect())
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
