// Building the ForwardBatch of a step and sampling from its logits.
#include "engine/model_runner.h"

#include "backend/backend.h"
#include "compiler/compiled_model.h"
#include "core/thread_pool.h"
#include "engine/model_session.h"
#include "engine/tensor_dump.h"

namespace kiln {

ModelRunner::ModelRunner(ModelSession& session)
    : session_(session), vocab_size_(session.config().vocab_size) {}

Expected<std::vector<SampleResult>> ModelRunner::Run(const ScheduledBatch& batch, TensorDumper* dumper) {
  // The batch limit is the session's to check (ModelSession::Forward).
  token_ids_.clear();
  positions_.clear();
  token_seq_.clear();
  query_start_.assign(1, 0);
  seq_lens_.clear();
  block_tables_.clear();
  output_rows_.clear();
  for (size_t s = 0; s < batch.seqs.size(); ++s) {
    const ScheduledSequence& entry = batch.seqs[s];
    const Sequence& seq = *entry.seq;
    for (int32_t p = entry.start; p < entry.start + entry.num_tokens; ++p) {
      token_ids_.push_back(seq.tokens[static_cast<size_t>(p)]);
      positions_.push_back(p);
      token_seq_.push_back(static_cast<int32_t>(s));
    }
    query_start_.push_back(static_cast<int32_t>(token_ids_.size()));
    seq_lens_.push_back(entry.start + entry.num_tokens);
    block_tables_.push_back(seq.block_table.data());
    if (entry.samples) output_rows_.push_back(static_cast<int32_t>(token_ids_.size()) - 1);
  }

  ForwardBatch fb;
  fb.num_tokens = static_cast<int32_t>(token_ids_.size());
  fb.token_ids = token_ids_.data();
  fb.positions = positions_.data();
  fb.token_seq = token_seq_.data();
  fb.num_seqs = static_cast<int32_t>(batch.seqs.size());
  fb.query_start = query_start_.data();
  fb.seq_lens = seq_lens_.data();
  fb.block_tables = block_tables_.data();
  fb.num_output_rows = static_cast<int32_t>(output_rows_.size());
  fb.output_rows = output_rows_.data();
  logits_.resize(output_rows_.size() * static_cast<size_t>(vocab_size_));

  // Grammar masks depend only on the tokens accepted so far, so they are
  // computed while the pass computes the logits.
  sampling_.clear();
  for (size_t s = 0; s < batch.seqs.size(); ++s) {
    if (batch.seqs[s].samples) sampling_.push_back(s);
  }
  if (masks_.size() < sampling_.size()) masks_.resize(sampling_.size());
  bool any_constrained = false;
  for (size_t row = 0; row < sampling_.size(); ++row) {
    const Sequence& seq = *batch.seqs[sampling_[row]].seq;
    if (seq.constraint && seq.constraint->active()) {
      any_constrained = true;
    } else {
      masks_[row].clear();
    }
  }
  if (any_constrained) {
    mask_worker_.Start([this, &batch] {
      for (size_t row = 0; row < sampling_.size(); ++row) {
        const Sequence& seq = *batch.seqs[sampling_[row]].seq;
        if (seq.constraint && seq.constraint->active()) seq.constraint->FillMask(&masks_[row]);
      }
    });
  }
  if (dumper != nullptr) dumper->BeginPass(token_ids_, positions_, token_seq_);
  Status forward = session_.Forward(fb, logits_.data(), vocab_size_, dumper ? &dumper->fn() : nullptr);
  if (any_constrained) mask_worker_.Wait();  // before any return: the task reads the batch
  KILN_RETURN_IF_ERROR(forward);

  if (dumper != nullptr) {
    BoundValue logits;
    logits.data = reinterpret_cast<uint8_t*>(logits_.data());
    logits.row_stride = vocab_size_;
    logits.cols = vocab_size_;
    logits.dtype = DType::kF32;
    logits.rows = RowSpace::kOutputRows;
    dumper->fn()("logits", logits, fb.num_output_rows);
    KILN_RETURN_IF_ERROR(dumper->EndPass());
  }

  // Each sequence samples from its own logits row with its own state, so
  // the rows go to the pool's threads: a batch of 16 spent about 5% of a
  // decode step sampling on one thread.
  std::vector<SampleResult> results(batch.seqs.size());
  ThreadPool& pool = session_.model().pool();
  pool.ParallelFor(static_cast<int64_t>(sampling_.size()), [&](int64_t begin, int64_t end, int) {
    for (int64_t row = begin; row < end; ++row) {
      const size_t s = sampling_[static_cast<size_t>(row)];
      Sequence& seq = *batch.seqs[s].seq;
      const std::vector<uint32_t>& mask = masks_[static_cast<size_t>(row)];
      const bool masked = seq.constraint && seq.constraint->active();
      results[s] = Sample(logits_.data() + static_cast<size_t>(row) * static_cast<size_t>(vocab_size_), vocab_size_,
                          seq.params, seq.sampler, masked ? &mask : nullptr);
    }
  });
  return results;
}

}  // namespace kiln
