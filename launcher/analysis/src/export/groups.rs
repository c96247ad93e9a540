//! Row groups of a table encoded on a worker, apart from their file, and appended to the file later, in order.
//!
//! A [`GroupFile`] is the table's file ([`super::table::parquet_writer`]: the same schema,
//! properties and metadata as a table written in one pass) opened for whole row groups; an
//! [`Encoder`] is a [`Sink`] that encodes a table's batches into row groups of at most
//! [`ROW_GROUP_ROWS`] rows in memory (compressed pages), from the file's column writer factory,
//! on any thread. What [`super::chunked`] exports a trace on every core with.

use std::fs::File;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;
use parquet::arrow::arrow_writer::{
    compute_leaves, ArrowColumnChunk, ArrowColumnWriter, ArrowRowGroupWriterFactory,
};
use parquet::file::writer::SerializedFileWriter;

use super::schema::Col;
use super::table::{arrow_schema, parquet_writer, Sink, ROW_GROUP_ROWS};
use crate::escape::terminal::Shown;
use crate::io::output::Staged;

/// One encoded row group of a table.
pub struct Group {
    chunks: Vec<ArrowColumnChunk>,
    pub rows: usize,
}

/// A table's file written a whole row group at a time, under its temporary name.
pub struct GroupFile {
    writer: SerializedFileWriter<File>,
    staged: Staged,
    path: PathBuf,
}

impl GroupFile {
    /// Starts `path` (its directory must exist) with the columns `cols`, and the factory of
    /// the column writers its row groups are encoded with.
    pub fn create(path: &Path, cols: &[Col]) -> Result<(GroupFile, ArrowRowGroupWriterFactory)> {
        let (staged, file) = Staged::create(path)?;
        let (writer, factory) = parquet_writer(file, cols, path)?
            .into_serialized_writer()
            .with_context(|| format!("{}: cannot start the Parquet file", path.shown()))?;
        let file = GroupFile {
            writer,
            staged,
            path: path.to_owned(),
        };
        Ok((file, factory))
    }

    /// Writes `group` as the file's next row group.
    pub fn append(&mut self, group: Group) -> Result<()> {
        let cannot = || format!("{}: cannot write", self.path.shown());
        let mut rg = self.writer.next_row_group().with_context(cannot)?;
        for c in group.chunks {
            c.append_to_row_group(&mut rg).with_context(cannot)?;
        }
        rg.close().with_context(cannot)?;
        Ok(())
    }

    /// Writes the footer and renames the file into place. A `GroupFile` dropped unfinished
    /// leaves nothing behind.
    pub fn finish(self) -> Result<()> {
        let file = self
            .writer
            .into_inner()
            .with_context(|| format!("{}: cannot write", self.path.shown()))?;
        self.staged.commit(file)
    }
}

/// A table's batches encoded into row groups held in memory, on the calling thread.
pub struct Encoder<'f> {
    factory: &'f ArrowRowGroupWriterFactory,
    schema: SchemaRef,
    writers: Option<Vec<ArrowColumnWriter>>,
    rows: usize,
    done: Vec<Group>,
}

impl<'f> Encoder<'f> {
    /// For the table of columns `cols` whose file `factory` came from ([`GroupFile::create`]).
    pub fn new(factory: &'f ArrowRowGroupWriterFactory, cols: &[Col]) -> Encoder<'f> {
        Encoder {
            factory,
            schema: arrow_schema(cols),
            writers: None,
            rows: 0,
            done: Vec::new(),
        }
    }

    fn close(&mut self) -> parquet::errors::Result<()> {
        if let Some(writers) = self.writers.take() {
            let chunks = writers
                .into_iter()
                .map(ArrowColumnWriter::close)
                .collect::<parquet::errors::Result<Vec<_>>>()?;
            self.done.push(Group {
                chunks,
                rows: self.rows,
            });
            self.rows = 0;
        }
        Ok(())
    }

    /// The row groups, in order (none for a table that got no rows).
    pub fn finish(mut self) -> parquet::errors::Result<Vec<Group>> {
        self.close()?;
        Ok(self.done)
    }
}

impl Sink for Encoder<'_> {
    fn write(&mut self, batch: &RecordBatch) -> parquet::errors::Result<()> {
        let writers = match &mut self.writers {
            Some(w) => w,
            // The index only matters to encrypted files, which these are not.
            None => self.writers.insert(self.factory.create_column_writers(0)?),
        };
        let mut next = writers.iter_mut();
        for (field, column) in self.schema.fields().iter().zip(batch.columns()) {
            for leaf in compute_leaves(field, column)? {
                next.next()
                    .expect("a writer per leaf column")
                    .write(&leaf)?;
            }
        }
        self.rows += batch.num_rows();
        // Batches are BATCH_ROWS rows, a divisor of ROW_GROUP_ROWS: groups of that size, as
        // the one-pass writer cuts them.
        if self.rows >= ROW_GROUP_ROWS {
            self.close()?;
        }
        Ok(())
    }
}
