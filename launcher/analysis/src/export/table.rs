//! One table of one trace file being written row by row, with bounded memory.
//!
//! Rows go into Arrow column builders; every [`BATCH_ROWS`] rows they become a record batch
//! handed to the Parquet writer, which encodes it at once and closes a row group every
//! [`ROW_GROUP_ROWS`] rows. So what a table holds at any time is one batch of raw values plus
//! one row group of encoded pages, whatever the size of the trace. The file is written under a
//! temporary name and renamed into place by [`Table::finish`] (see `crate::io::output`). The
//! batches can instead go to another [`Sink`] (`super::groups`: row groups encoded on a worker).

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result};
use arrow_array::builder::{BooleanBuilder, Float64Builder, Int64Builder, StringBuilder};
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, Encoding, ZstdLevel};
use parquet::file::properties::{EnabledStatistics, WriterProperties, WriterVersion};
use parquet::schema::types::ColumnPath;

use super::schema::{Col, Enc, Kind};
use crate::escape::terminal::Shown;
use crate::io::output::Staged;

/// Rows buffered as Arrow arrays before they are encoded.
pub const BATCH_ROWS: usize = 16 * 1024;
/// Rows per Parquet row group: the unit DuckDB and Spark split a scan on.
pub const ROW_GROUP_ROWS: usize = 256 * 1024;

enum Builder {
    Int(Int64Builder),
    Float(Float64Builder),
    Text(StringBuilder),
    Bool(BooleanBuilder),
}

impl Builder {
    fn new(kind: Kind) -> Self {
        match kind {
            Kind::Int => Builder::Int(Int64Builder::with_capacity(BATCH_ROWS)),
            Kind::Float => Builder::Float(Float64Builder::with_capacity(BATCH_ROWS)),
            Kind::Text => Builder::Text(StringBuilder::with_capacity(BATCH_ROWS, BATCH_ROWS * 32)),
            Kind::Bool => Builder::Bool(BooleanBuilder::with_capacity(BATCH_ROWS)),
        }
    }

    fn finish(&mut self) -> ArrayRef {
        match self {
            Builder::Int(b) => Arc::new(b.finish()),
            Builder::Float(b) => Arc::new(b.finish()),
            Builder::Text(b) => Arc::new(b.finish()),
            Builder::Bool(b) => Arc::new(b.finish()),
        }
    }
}

/// The Arrow schema of a table's columns.
pub fn arrow_schema(cols: &[Col]) -> SchemaRef {
    let fields: Vec<Field> = cols
        .iter()
        .map(|c| {
            let t = match c.kind {
                Kind::Int => DataType::Int64,
                Kind::Float => DataType::Float64,
                Kind::Text => DataType::Utf8,
                Kind::Bool => DataType::Boolean,
            };
            Field::new(c.name, t, c.nullable)
        })
        .collect();
    Arc::new(Schema::new(fields))
}

/// Encodings per column: names and small ids dictionary-encoded (a kernel name is stored once
/// per row group, rows hold its index), times and counters delta-encoded (they mostly grow, so
/// the deltas are small), zstd level 1 over both (level 3 made files 3% smaller and the export
/// slower). No min/max statistics on text: comparing every long kernel name costs time, and
/// queries filter names through the dictionary anyway.
fn properties(cols: &[Col]) -> WriterProperties {
    let mut p = WriterProperties::builder()
        .set_writer_version(WriterVersion::PARQUET_1_0)
        .set_compression(Compression::ZSTD(
            ZstdLevel::try_new(1).expect("valid level"),
        ))
        .set_max_row_group_size(ROW_GROUP_ROWS)
        .set_created_by(format!("cuprof export {}", env!("CARGO_PKG_VERSION")));
    for c in cols {
        let path = ColumnPath::from(c.name);
        if c.kind == Kind::Text {
            p = p.set_column_statistics_enabled(path.clone(), EnabledStatistics::None);
        }
        p = match c.enc {
            Enc::Dict => p.set_column_dictionary_enabled(path, true),
            Enc::Delta => p
                .set_column_dictionary_enabled(path.clone(), false)
                .set_column_encoding(path, Encoding::DELTA_BINARY_PACKED),
            Enc::Plain => p
                .set_column_dictionary_enabled(path.clone(), false)
                .set_column_encoding(path, Encoding::PLAIN),
        };
    }
    p.build()
}

/// Where a table's record batches go: its Parquet file ([`ParquetFile`]), or row groups encoded
/// apart from it (`super::groups::Encoder`).
pub trait Sink {
    fn write(&mut self, batch: &RecordBatch) -> parquet::errors::Result<()>;
}

/// A table's file being written, under its temporary name.
pub struct ParquetFile {
    writer: ArrowWriter<File>,
    staged: Staged,
}

impl Sink for ParquetFile {
    fn write(&mut self, batch: &RecordBatch) -> parquet::errors::Result<()> {
        self.writer.write(batch)
    }
}

/// Starts a Parquet file of the columns `cols` in `file` (its name `path`), with their
/// [`properties`].
pub fn parquet_writer(file: File, cols: &[Col], path: &Path) -> Result<ArrowWriter<File>> {
    ArrowWriter::try_new(file, arrow_schema(cols), Some(properties(cols)))
        .with_context(|| format!("{}: cannot start the Parquet file", path.shown()))
}

/// A table of one trace file, its rows going to `S` (by default its Parquet file).
pub struct Table<S = ParquetFile> {
    cols: &'static [Col],
    schema: SchemaRef,
    builders: Vec<Builder>,
    rows: usize,
    total: u64,
    sink: S,
    path: PathBuf,
}

impl Table {
    /// Starts `path` (its directory must exist) with the columns `cols`.
    pub fn create(path: &Path, cols: &'static [Col]) -> Result<Table> {
        let (staged, file) = Staged::create(path)?;
        let writer = parquet_writer(file, cols, path)?;
        Ok(Table::with_sink(path, cols, ParquetFile { writer, staged }))
    }

    /// Writes what is buffered and the footer, and renames the file into place.
    pub fn finish(self) -> Result<u64> {
        let path = self.path.clone();
        let (sink, total) = self.into_sink()?;
        let file = sink
            .writer
            .into_inner()
            .with_context(|| format!("{}: cannot write", path.shown()))?;
        sink.staged.commit(file)?;
        Ok(total)
    }
}

impl<S: Sink> Table<S> {
    /// A table of the columns `cols` whose batches go to `sink`; `path` names it in messages.
    pub fn with_sink(path: &Path, cols: &'static [Col], sink: S) -> Table<S> {
        Table {
            cols,
            schema: arrow_schema(cols),
            builders: cols.iter().map(|c| Builder::new(c.kind)).collect(),
            rows: 0,
            total: 0,
            sink,
            path: path.to_owned(),
        }
    }

    /// A new row: set every column, in schema order, then [`Row::end`].
    pub fn row(&mut self) -> Row<'_, S> {
        Row { t: self, at: 0 }
    }

    fn flush(&mut self) -> Result<()> {
        if self.rows == 0 {
            return Ok(());
        }
        let arrays: Vec<ArrayRef> = self.builders.iter_mut().map(Builder::finish).collect();
        let batch = RecordBatch::try_new(self.schema.clone(), arrays)
            .with_context(|| format!("{}: inconsistent columns", self.path.shown()))?;
        self.sink
            .write(&batch)
            .with_context(|| format!("{}: cannot write", self.path.shown()))?;
        self.rows = 0;
        Ok(())
    }

    /// Hands what is buffered to the sink; the sink and the rows the table got.
    pub fn into_sink(mut self) -> Result<(S, u64)> {
        self.flush()?;
        Ok((self.sink, self.total))
    }
}

/// A row being filled, column by column.
pub struct Row<'t, S> {
    t: &'t mut Table<S>,
    at: usize,
}

impl<S: Sink> Row<'_, S> {
    fn next(&mut self) -> &mut Builder {
        let i = self.at;
        self.at += 1;
        &mut self.t.builders[i]
    }

    fn mismatch(&self, what: &str) -> ! {
        let c = &self.t.cols[self.at - 1];
        panic!("column {} is {:?}, given {what}", c.name, c.kind)
    }

    pub fn int(mut self, v: impl Into<Option<i64>>) -> Self {
        match self.next() {
            Builder::Int(b) => b.append_option(v.into()),
            _ => self.mismatch("an integer"),
        }
        self
    }

    pub fn float(mut self, v: Option<f64>) -> Self {
        match self.next() {
            Builder::Float(b) => b.append_option(v),
            _ => self.mismatch("a float"),
        }
        self
    }

    pub fn text(mut self, v: Option<&str>) -> Self {
        match self.next() {
            Builder::Text(b) => b.append_option(v),
            _ => self.mismatch("text"),
        }
        self
    }

    pub fn boolean(mut self, v: Option<bool>) -> Self {
        match self.next() {
            Builder::Bool(b) => b.append_option(v),
            _ => self.mismatch("a boolean"),
        }
        self
    }

    /// Completes the row; every column must have been set.
    pub fn end(self) -> Result<()> {
        assert_eq!(
            self.at,
            self.t.cols.len(),
            "a row of {} sets {} of its {} columns",
            self.t.path.shown(),
            self.at,
            self.t.cols.len()
        );
        self.t.rows += 1;
        self.t.total += 1;
        if self.t.rows >= BATCH_ROWS {
            self.t.flush()?;
        }
        Ok(())
    }
}
