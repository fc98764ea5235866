// y = x @ w with x split by rows over 4 device groups and replicated twice within each group
// (partial replication), w replicated, y sharded as x.
module @partial_replication_matmul attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%x: tensor<8x6xf32> {mhlo.sharding = "{devices=[4,1,2]<=[8] last_tile_dim_replicate}"},
                         %w: tensor<6x4xf32> {mhlo.sharding = "{replicated}"})
      -> (tensor<8x4xf32> {mhlo.sharding = "{devices=[4,1,2]<=[8] last_tile_dim_replicate}"}) {
    %y = stablehlo.dot_general %x, %w, contracting_dims = [1] x [0]
        : (tensor<8x6xf32>, tensor<6x4xf32>) -> tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}
