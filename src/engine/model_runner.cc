// Building the ForwardBatch of a step and sampling from its logits.
#include "engine/model_runner.h"

#include <cassert>

#include "backend/backend.h"
#include "compiler/compiled_model.h"
#include "compiler/profiler.h"
#include "core/thread_pool.h"
#include "engine/draft_verifier.h"
#include "engine/model_session.h"
#include "engine/tensor_dump.h"

namespace kiln {

ModelRunner::ModelRunner(ModelSession& session)
    : session_(session), vocab_size_(session.config().vocab_size) {}

Expected<std::vector<std::vector<SampleResult>>> ModelRunner::Run(const ScheduledBatch& batch,
                                                                  TensorDumper* dumper,
                                                                  KvLayerCallback on_kv_layer_written) {
  // The batch limit is the session's to check (ModelSession::Forward).
  ProfileScope preparing("prepare batch", "engine");
  builder_.Clear();
  sampling_.clear();
  for (size_t s = 0; s < batch.seqs.size(); ++s) {
    const ScheduledSequence& entry = batch.seqs[s];
    const Sequence& seq = *entry.seq;
    assert(entry.num_draft_tokens == static_cast<int32_t>(seq.draft.size()));
    assert(entry.num_draft_tokens == 0 || entry.samples);
    const int32_t end = entry.start + entry.num_tokens;
    const int32_t first_draft = end - entry.num_draft_tokens;
    for (int32_t p = entry.start; p < end; ++p) {
      builder_.AddToken(p < first_draft ? seq.tokens[static_cast<size_t>(p)]
                                        : seq.draft[static_cast<size_t>(p - first_draft)],
                        p);
    }
    builder_.EndSequence(end, seq.block_table.data(),
                         seq.window_block_table.empty() ? nullptr : seq.window_block_table.data());
    if (entry.samples) {
      // The last token's row and every draft token's row.
      sampling_.push_back({s, builder_.num_output_rows()});
      const int32_t last_row = builder_.num_tokens() - 1;
      for (int32_t row = last_row - entry.num_draft_tokens; row <= last_row; ++row) builder_.AddOutputRow(row);
    }
  }

  ForwardBatch fb = builder_.Batch();
  fb.on_kv_layer_written = on_kv_layer_written;
  const auto num_rows = static_cast<size_t>(fb.num_output_rows);
  logits_.resize(num_rows * static_cast<size_t>(vocab_size_));

  // Grammar masks depend only on the tokens accepted so far, so they are
  // computed while the pass computes the logits: one per logits row, a
  // draft token's row with the grammar advanced through the draft tokens
  // before it (then rolled back: the engine advances it by the tokens that
  // verification keeps).
  if (masks_.size() < num_rows) masks_.resize(num_rows);
  row_masks_.assign(num_rows, nullptr);
  bool any_constrained = false;
  for (const SamplingSeq& sampling : sampling_) {
    const ScheduledSequence& entry = batch.seqs[sampling.entry];
    if (!entry.seq->constraint || !entry.seq->constraint->active()) continue;
    any_constrained = true;
    for (int32_t row = 0; row <= entry.num_draft_tokens; ++row) {
      row_masks_[static_cast<size_t>(sampling.first_row + row)] =
          &masks_[static_cast<size_t>(sampling.first_row + row)];
    }
  }
  if (any_constrained) {
    mask_worker_.Start([this, &batch] {
      ProfileScope span("grammar masks", "engine");
      for (const SamplingSeq& sampling : sampling_) {
        Sequence& seq = *batch.seqs[sampling.entry].seq;
        if (!seq.constraint || !seq.constraint->active()) continue;
        // The engine cut the draft to what the grammar allows
        // (OutputConstraint::AllowedPrefix), so every Accept succeeds.
        size_t advanced = 0;
        for (size_t row = 0; row <= seq.draft.size(); ++row) {
          seq.constraint->FillMask(&masks_[static_cast<size_t>(sampling.first_row) + row]);
          if (row == seq.draft.size()) break;
          // Should Accept fail, this row's mask rejects the token, so the
          // rows after it are never read.
          if (!seq.constraint->Accept(seq.draft[row])) break;
          ++advanced;
        }
        seq.constraint->Rollback(advanced);
      }
    });
  }
  if (dumper != nullptr) dumper->BeginPass(builder_.token_ids(), builder_.positions(), builder_.token_seq());
  preparing.End();
  Status forward;
  {
    ProfileScope span("forward", "engine");
    forward = session_.Forward(fb, logits_.data(), vocab_size_, dumper ? &dumper->fn() : nullptr);
  }
  if (any_constrained) {
    ProfileScope span("wait for grammar masks", "engine");
    mask_worker_.Wait();  // before any return: the task reads the batch
  }
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

  // Each sequence samples from its own logits rows with its own state, so
  // the sequences go to the pool's threads: a batch of 16 spent about 5% of
  // a decode step sampling on one thread.
  ProfileScope sampling("sample", "engine");
  std::vector<std::vector<SampleResult>> results(batch.seqs.size());
  ThreadPool& pool = session_.model().pool();
  pool.ParallelFor(static_cast<int64_t>(sampling_.size()), [&](int64_t begin, int64_t end, int) {
    for (auto i = static_cast<size_t>(begin); i < static_cast<size_t>(end); ++i) {
      const SamplingSeq& sampling = sampling_[i];
      Sequence& seq = *batch.seqs[sampling.entry].seq;
      float* rows =
          logits_.data() + static_cast<size_t>(sampling.first_row) * static_cast<size_t>(vocab_size_);
      const std::vector<uint32_t>* const* masks = row_masks_.data() + sampling.first_row;
      if (!seq.draft.empty()) {
        DraftContext context;
        context.probs = seq.draft_probs;
        if (masks[0] != nullptr) context.masks = std::span(masks, seq.draft.size() + 1);
        results[sampling.entry] = VerifyDraft(rows, vocab_size_, seq.draft, context, seq.params, seq.sampler);
        continue;
      }
      SampleResult drawn = Sample(rows, vocab_size_, seq.params, seq.sampler, masks[0]);
      if (drawn.token >= 0) AcceptToken(seq.sampler, drawn.token);
      results[sampling.entry].push_back(std::move(drawn));
    }
  });
  return results;
}

}  // namespace kiln
