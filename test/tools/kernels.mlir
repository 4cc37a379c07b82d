// Every bundled kernel goes through the front end (tiling, online softmax, block pruning,
// cleanup) and through the whole CPU pipeline to the LLVM dialect. No written-form op, no sweep
// marker and no natural exp survive the front end.

// DEFINE: %{front} = tilefuse-opt --tile-front-end
// DEFINE: %{check} = FileCheck %s --implicit-check-not=tile.load --implicit-check-not=tile.dot \
// DEFINE:   --implicit-check-not=tile.softmax --implicit-check-not=tile.store \
// DEFINE:   --implicit-check-not=tile.sweep --implicit-check-not=math.exp{{[^2]}}

// RUN: %{front} %kernels/attention.mlir -o %t.attention.mlir
// RUN: %{check} --input-file %t.attention.mlir --check-prefix=COMMON
// RUN: %{check} --input-file %t.attention.mlir --check-prefix=ATTENTION
// RUN: %{front} %kernels/causal.mlir -o %t.causal.mlir
// RUN: %{check} --input-file %t.causal.mlir --check-prefix=COMMON
// RUN: %{check} --input-file %t.causal.mlir --check-prefix=CAUSAL
// RUN: %{front} %kernels/gqa.mlir -o %t.gqa.mlir
// RUN: %{check} --input-file %t.gqa.mlir --check-prefix=COMMON
// RUN: %{check} --input-file %t.gqa.mlir --check-prefix=GQA
// RUN: %{front} %kernels/mqa.mlir -o %t.mqa.mlir
// RUN: %{check} --input-file %t.mqa.mlir --check-prefix=COMMON
// RUN: %{check} --input-file %t.mqa.mlir --check-prefix=MQA
// RUN: %{front} %kernels/prefix_lm.mlir -o %t.prefix_lm.mlir
// RUN: %{check} --input-file %t.prefix_lm.mlir --check-prefix=COMMON
// RUN: %{check} --input-file %t.prefix_lm.mlir --check-prefix=PREFIX
// RUN: %{front} %kernels/sliding_window.mlir -o %t.sliding_window.mlir
// RUN: %{check} --input-file %t.sliding_window.mlir --check-prefix=COMMON
// RUN: %{check} --input-file %t.sliding_window.mlir --check-prefix=WINDOW
// RUN: %{front} %kernels/softcap.mlir -o %t.softcap.mlir
// RUN: %{check} --input-file %t.softcap.mlir --check-prefix=COMMON
// RUN: %{check} --input-file %t.softcap.mlir --check-prefix=SOFTCAP
// RUN: %{front} %kernels/alibi.mlir -o %t.alibi.mlir
// RUN: %{check} --input-file %t.alibi.mlir --check-prefix=COMMON
// RUN: %{check} --input-file %t.alibi.mlir --check-prefix=ALIBI

// RUN: tilefuse-opt %kernels/attention.mlir --tile-to-cpu | FileCheck %s --check-prefix=LLVM -DNAME=attention
// RUN: tilefuse-opt %kernels/causal.mlir --tile-to-cpu | FileCheck %s --check-prefix=LLVM -DNAME=causal
// RUN: tilefuse-opt %kernels/gqa.mlir --tile-to-cpu | FileCheck %s --check-prefix=LLVM -DNAME=gqa
// RUN: tilefuse-opt %kernels/mqa.mlir --tile-to-cpu | FileCheck %s --check-prefix=LLVM -DNAME=mqa
// RUN: tilefuse-opt %kernels/prefix_lm.mlir --tile-to-cpu | FileCheck %s --check-prefix=LLVM -DNAME=prefix_lm
// RUN: tilefuse-opt %kernels/sliding_window.mlir --tile-to-cpu | FileCheck %s --check-prefix=LLVM -DNAME=sliding_window
// RUN: tilefuse-opt %kernels/softcap.mlir --tile-to-cpu | FileCheck %s --check-prefix=LLVM -DNAME=softcap
// RUN: tilefuse-opt %kernels/alibi.mlir --tile-to-cpu | FileCheck %s --check-prefix=LLVM -DNAME=alibi

// The shape every kernel shares: one program per (batch, head, 64 query rows), the key/value
// range trimmed by two scans, one fused loop with the mask only on partial blocks.
// COMMON:       scf.forall
// COMMON:         tile.block_load {{.+}} -> tensor<64x64xbf16>
// COMMON:         %[[LO:.+]] = scf.while
// COMMON:         %[[HI:.+]] = scf.while
// COMMON:         scf.for %{{.+}} = %[[LO]] to %[[HI]] step {{.+}} -> (tensor<64xf32>, tensor<64xf32>, tensor<64x64xf32>) {
// COMMON:           scf.if
// COMMON-NEXT:        scf.if
// COMMON:               tile.block_mask
// COMMON:               math.exp2
// COMMON:             } else {
// COMMON-NOT:           tile.block_mask
// COMMON:               math.exp2
// COMMON:         } {tile.kv_loop}
// COMMON:         tile.block_store {{.+}} : tensor<64x64xf32>
// COMMON:         tile.block_store {{.+}} : tensor<64xf32>
// COMMON:       return

// ATTENTION-LABEL: func.func @attention(
// ATTENTION-NOT:   tile.block_score_mod

// CAUSAL-LABEL: func.func @causal(
// CAUSAL:         tile.block_mask
// CAUSAL-NEXT:    ^bb0(%{{.+}}: index, %{{.+}}: index, %[[QI:[a-z0-9_]+]]: index, %[[KV:[a-z0-9_]+]]: index):
// CAUSAL-NEXT:      %[[C:.+]] = arith.cmpi ule, %[[KV]], %[[QI]] : index
// CAUSAL-NEXT:      %[[B:.+]] = arith.cmpi ult, %[[KV]], %{{.+}} : index
// CAUSAL-NEXT:      arith.andi %[[C]], %[[B]] : i1

// Eight query heads over two key/value heads: head h reads key/value head h / 4.
// GQA-LABEL: func.func @gqa(
// GQA:         %[[G:.+]] = arith.constant 4 : index
// GQA:         scf.forall (%{{[a-z0-9_]+}}, %[[H:[a-z0-9_]+]], %{{[a-z0-9_]+}}) in (%{{.+}}, 8, %{{.+}})
// GQA:           %[[HK:.+]] = arith.divui %[[H]], %[[G]] : index
// GQA:           tile.block_load %{{.+}}[%{{.+}}, %[[HK]], %{{.+}}] {{.+}} : memref<?x2x?x64xbf16, {{.+}}> -> tensor<64x64xbf16>

// One key/value head for all eight query heads.
// MQA-LABEL: func.func @mqa(
// MQA:         %[[G:.+]] = arith.constant 8 : index
// MQA:         scf.forall (%{{[a-z0-9_]+}}, %[[H:[a-z0-9_]+]], %{{[a-z0-9_]+}}) in (%{{.+}}, 8, %{{.+}})
// MQA:           %[[HK:.+]] = arith.divui %[[H]], %[[G]] : index
// MQA:           tile.block_load %{{.+}}[%{{.+}}, %[[HK]], %{{.+}}] {{.+}} : memref<?x1x?x64xbf16, {{.+}}> -> tensor<64x64xbf16>

// PREFIX-LABEL: func.func @prefix_lm(
// PREFIX:         %[[P:.+]] = arith.constant {tile.param = "prefix"} 100 : index
// PREFIX:         tile.block_mask
// PREFIX-NEXT:    ^bb0(%{{.+}}: index, %{{.+}}: index, %[[QI:[a-z0-9_]+]]: index, %[[KV:[a-z0-9_]+]]: index):
// PREFIX-NEXT:      %[[IN:.+]] = arith.cmpi ult, %[[KV]], %[[P]] : index
// PREFIX-NEXT:      %[[C:.+]] = arith.cmpi ule, %[[KV]], %[[QI]] : index
// PREFIX-NEXT:      arith.ori %[[IN]], %[[C]] : i1

// WINDOW-LABEL: func.func @sliding_window(
// WINDOW-DAG:     %[[L:.+]] = arith.constant {tile.param = "window_left"} 100 : index
// WINDOW-DAG:     %[[R:.+]] = arith.constant {tile.param = "window_right"} 20 : index
// WINDOW:         tile.block_mask
// WINDOW-NEXT:    ^bb0(%{{.+}}: index, %{{.+}}: index, %[[QI:[a-z0-9_]+]]: index, %[[KV:[a-z0-9_]+]]: index):
// WINDOW-NEXT:      arith.addi %[[KV]], %[[L]] : index
// WINDOW-NEXT:      arith.addi %[[QI]], %[[R]] : index

// The score_mod is not linear, so log2(e) is applied after it instead of in the scale.
// SOFTCAP-LABEL: func.func @softcap(
// SOFTCAP-DAG:     %[[SCALE:.+]] = arith.constant dense<1.250000e-01> : tensor<64x64xf32>
// SOFTCAP-DAG:     %[[LOG2E:.+]] = arith.constant dense<1.44269502> : tensor<64x64xf32>
// SOFTCAP:         arith.mulf %{{.+}}, %[[SCALE]]
// SOFTCAP-NEXT:    %[[MOD:.+]] = tile.block_score_mod
// SOFTCAP:           math.tanh
// SOFTCAP:         %[[M:.+]] = tile.block_mask %[[MOD]]
// SOFTCAP:         arith.mulf %[[M]], %[[LOG2E]]

// The bias reads the head count from outside its region.
// ALIBI-LABEL: func.func @alibi(
// ALIBI-SAME:    %[[Q:[a-z0-9_]+]]: memref
// ALIBI:         %[[H:.+]] = memref.dim %[[Q]], %c1{{(_[0-9]+)?}} :
// ALIBI:         tile.block_score_mod
// ALIBI:           arith.index_cast %[[H]] : index to i64
// ALIBI:           math.exp2 %{{.+}} : f32
// ALIBI:         tile.block_mask
// ALIBI:           arith.cmpi ule

// LLVM:       llvm.func @[[NAME]](
// LLVM:         llvm.call @malloc
// LLVM:         llvm.return
