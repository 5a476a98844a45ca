//! The jobs the engine runs. Each opens its own connection to the library (SQLite in WAL mode
//! lets the GUI keep reading meanwhile) and reports through the job's [`Progress`].

use super::Progress;
use crate::compute::Compute;
use crate::data::images;
use crate::data::import::{self, ImportLayout, ImportOptions, ImportReport};
use crate::store::{OpenMode, Store, set_thumbnail};
use burn::tensor::{Tensor, TensorData};
use std::path::{Path, PathBuf};

#[derive(Debug, Clone)]
pub enum Job {
    /// Import a data layout from `path` into the library.
    Import {
        layout: ImportLayout,
        path: PathBuf,
        options: ImportOptions,
    },
    /// Import single image files (opened or dropped in the GUI) as frames.
    ImportFiles {
        files: Vec<PathBuf>,
        options: ImportOptions,
    },
    /// Compute the thumbnails the library lacks (media added by other tools).
    Thumbnails,
    /// A small matrix product on the engine's device: proves the backend works end to end.
    DeviceCheck,
}

#[derive(Debug, Clone, PartialEq)]
pub enum JobOutput {
    Imported(ImportReport),
    Thumbnails { made: usize, failed: Vec<String> },
    DeviceCheck { values: Vec<f32> },
}

pub(super) fn run(
    compute: &Compute,
    library: &Path,
    job: Job,
    progress: &Progress,
) -> Result<JobOutput, String> {
    match job {
        Job::Import {
            layout,
            path,
            options,
        } => {
            let mut store =
                Store::open(library, OpenMode::CreateIfMissing).map_err(|e| e.to_string())?;
            import::run(layout, &mut store, &path, options, progress)
                .map(JobOutput::Imported)
                .map_err(|e| e.to_string())
        }
        Job::ImportFiles { files, options } => {
            let mut store =
                Store::open(library, OpenMode::CreateIfMissing).map_err(|e| e.to_string())?;
            let root = files
                .first()
                .and_then(|f| f.parent())
                .map(Path::to_path_buf)
                .unwrap_or_default();
            import_files(&mut store, &root, &files, options, progress)
                .map(JobOutput::Imported)
                .map_err(|e| e.to_string())
        }
        Job::Thumbnails => {
            let mut store = Store::open(library, OpenMode::Existing).map_err(|e| e.to_string())?;
            thumbnails(&mut store, progress).map_err(|e| e.to_string())
        }
        Job::DeviceCheck => Ok(JobOutput::DeviceCheck {
            values: device_check(compute),
        }),
    }
}

fn import_files(
    store: &mut Store,
    root: &Path,
    files: &[PathBuf],
    options: ImportOptions,
    progress: &Progress,
) -> Result<ImportReport, import::ImportError> {
    let mut problems = import::Problems::default();
    let plan = import::folder::read_files(root, files, progress, &mut problems)?;
    problems.check(options)?;
    import::plan::write(store, &plan, "import:files", problems.0, progress)
}

fn thumbnails(store: &mut Store, progress: &Progress) -> crate::store::Result<JobOutput> {
    let missing = store.media_without_thumbnail()?;
    progress.stage("thumbnails", missing.len() as u64);
    let mut made = Vec::new();
    let mut failed = Vec::new();
    for m in &missing {
        if progress.is_cancelled() {
            break;
        }
        match images::decode_file(&store.media_path(m)) {
            Ok(d) => made.push((
                m.id,
                images::thumbnail_jpeg(&d.image, import::THUMBNAIL_SIDE),
            )),
            Err(e) => failed.push(format!("{}: {e}", m.rel_path)),
        }
        progress.inc();
    }
    store.write(|tx| -> crate::store::Result<()> {
        for (id, png) in &made {
            set_thumbnail(tx, *id, png)?;
        }
        Ok(())
    })?;
    Ok(JobOutput::Thumbnails {
        made: made.len(),
        failed,
    })
}

/// `[[1, 2], [3, 4]] x [[5, 6], [7, 8]]` on the device, row-major.
pub fn device_check(compute: &Compute) -> Vec<f32> {
    let d = &compute.device;
    let a = Tensor::<2>::from_data(TensorData::new(vec![1.0f32, 2.0, 3.0, 4.0], [2, 2]), d);
    let b = Tensor::<2>::from_data(TensorData::new(vec![5.0f32, 6.0, 7.0, 8.0], [2, 2]), d);
    a.matmul(b)
        .into_data()
        .try_to_vec::<f32>()
        .expect("f32 tensor data")
}
