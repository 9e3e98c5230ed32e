// defines: write_nvidia_hdf5(): NvidiaInstances as NVIDIA's BERT .hdf5 shard (the six datasets of
//          create_pretraining_data.py's write_instance_to_example_file, in its order, types and shapes)
#pragma once
#include <string>

#include "prep/nvidia_instances.h"

namespace lmforge::prep {

// Writes `path` (replacing it) with input_ids i4 [N, L], input_mask i1 [N, L], segment_ids i1 [N, L],
// masked_lm_positions i4 [N, P], masked_lm_ids i4 [N, P], next_sentence_labels i1 [N], each with the deflate
// filter at level 4 as h5py's compression='gzip' declares it, no attributes. Rows follow instances.rows. The
// chunks are built and deflated (RunDeflater, run_deflate.h) on `workers` threads and handed to HDF5 already
// compressed (H5Dwrite_chunk); HDF5 itself runs on the calling thread only. The values equal the script's; the
// file's bytes (chunk shapes, deflate streams) need not. Errors name the path and the reason.
void write_nvidia_hdf5(const std::string& path, const NvidiaInstances& instances, int workers);

}  // namespace lmforge::prep
